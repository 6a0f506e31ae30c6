"""The one exception type the CLI turns into a one-line message and exit code 2."""


class UserError(Exception):
    """Bad input from the user (unknown name, wrong shape, missing asset …).

    The message must fit on one line and say what is wrong and what is allowed.
    """


class MissingAssetError(UserError):
    """An optional asset (package, data file) is not installed; the message names the install command."""

    def __init__(self, what: str, install: str):
        super().__init__(f"{what} is not installed; install it with: {install}")
        self.what = what
        self.install = install
