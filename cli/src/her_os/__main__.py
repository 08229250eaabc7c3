"""`python -m her_os`: the same as the `her-os` command."""

from her_os.main import app

app(prog_name="her-os")
