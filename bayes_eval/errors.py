"""Every error class of bayes_eval, in one place (``docs/architecture.md``).

All are ``ValueError`` subclasses, so ``except ValueError`` catches bad input of any kind;
each message names the problem (column and row, item, file) and, for the session errors,
nothing in the session file has changed when one is raised.

* :class:`PoolError` -- a pool, or data given for it, failed validation.
* :class:`SessionError` and its subclasses -- a refused session operation.
* :class:`UsageError` -- a bad command-line option (the CLI prints it and exits with 2).

**Two interfaces.**  ``str(exc)`` speaks Python (keyword arguments, ``Session.open``); an
error whose remedy reads differently on the command line also carries ``exc.cli``, the
same message in the command line's terms (flags such as ``--pool FILE``).
:func:`cli_message` is what ``bayes-eval`` prints.
"""
from __future__ import annotations

__all__ = [
    "PoolError",
    "SessionError",
    "PoolMismatchError",
    "UnknownItemError",
    "NotDrawnError",
    "InvalidLabelError",
    "LabelConflictError",
    "EmptyInputError",
    "MalformedInputError",
    "StaleSessionError",
    "UsageError",
    "cli_message",
]


class _Error(ValueError):
    """Base of the errors below: a message for the API and, optionally, ``cli`` -- the same
    message for the command line, where its advice names flags instead of Python names."""

    def __init__(self, message: str = "", *, cli: str | None = None):
        super().__init__(message)
        self.cli = cli

    def __reduce__(self):  # keyword-only state survives pickling (multiprocessing)
        return (_rebuild, (type(self), self.args[0] if self.args else "", self.cli))


def _rebuild(cls, message, cli):
    return cls(message, cli=cli)


def cli_message(exc: BaseException) -> str:
    """What the command line prints for ``exc``: its ``cli`` message where it has one,
    else ``str(exc)``."""
    return getattr(exc, "cli", None) or str(exc)


class PoolError(_Error):
    """A pool (or data given for it) failed validation; the message names column and row."""


class UsageError(_Error):
    """A command-line option or argument that cannot be used (``bayes_eval.cli``)."""


class SessionError(_Error):
    """Any refused session operation.  The message names the problem (item, row, file);
    nothing in the session file has changed when it is raised."""


class PoolMismatchError(SessionError):
    """The pool given on reopen is not the pool the session was created on."""


class UnknownItemError(SessionError):
    """An item id that is not in the pool."""


class NotDrawnError(SessionError):
    """A label for an item (or draw) the session never asked for."""


class InvalidLabelError(SessionError):
    """A label value outside the label set (after applying the label mapping)."""


class LabelConflictError(SessionError):
    """A second, different label for an item under a deterministic oracle (or for one
    draw under a stochastic oracle)."""


class EmptyInputError(SessionError):
    """A labels file or call with no labels in it."""


class MalformedInputError(SessionError):
    """A labels file or row that cannot be read (bad JSON, missing columns or ids)."""


class StaleSessionError(SessionError):
    """The session file was changed by another process since this one opened it."""
