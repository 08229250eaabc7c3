"""`python -m context_engine`: run the context engine under uvicorn."""

from context_engine.app import SERVICE, create_app
from context_engine.config import Settings
from her_os_shared.service import serve


def main() -> None:
    settings = Settings()
    serve(lambda: create_app(settings), settings, SERVICE)


if __name__ == "__main__":
    main()
