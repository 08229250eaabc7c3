"""`python -m annie_voice`: run the Annie voice agent under uvicorn."""

from annie_voice.app import SERVICE, create_app
from annie_voice.config import Settings
from her_os_shared.service import serve


def main() -> None:
    settings = Settings()
    serve(lambda: create_app(settings), settings, SERVICE)


if __name__ == "__main__":
    main()
