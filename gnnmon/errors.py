"""Exceptions gnnmon raises on bad input."""

from __future__ import annotations


class GnnmonError(Exception):
    """Base class of gnnmon's own errors."""


class DeviceError(GnnmonError, ValueError):
    """A device string or object gnnmon cannot measure (unknown, unsupported or unavailable)."""


class ReportFileError(GnnmonError, ValueError):
    """A report file that is not a gnnmon JSON Lines file, or is corrupt before its last line."""
