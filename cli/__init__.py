"""Typer command-line interface: one thin module per subcommand."""
