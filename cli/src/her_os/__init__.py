"""her_os: the `her-os` command line that runs the platform on its embedded defaults."""

__version__ = "0.1.0"
