"""The `recx` command line: the launcher, the Typer app, shell completion and the catalogue it reads."""
