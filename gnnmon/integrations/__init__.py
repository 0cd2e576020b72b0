"""Adapters from other tools' training loops to gnnmon's measurements: a Lightning callback that
opens one row per training batch, timed and with its phases taken from the loop's own hooks.

May import: gnnmon.measure, gnnmon.record, gnnmon.devices and the root modules (it drives the
measurements the decorators use; nothing below imports it). Import the integration you use
(``gnnmon.integrations.lightning``): this package imports no third-party tool."""
