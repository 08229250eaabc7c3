"""`python -m audio_pipeline`: run the audio pipeline under uvicorn."""

from audio_pipeline.app import SERVICE, create_app
from audio_pipeline.config import Settings
from her_os_shared.service import serve


def main() -> None:
    settings = Settings()
    serve(lambda: create_app(settings), settings, SERVICE)


if __name__ == "__main__":
    main()
