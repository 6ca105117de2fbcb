"""What users run: the ``ctxmgmt`` command, pictures of a context, the shared test doubles.

The command (:mod:`~ctxmgmt.app.cli`) runs the demo and the benchmark (:mod:`ctxmgmt.app.bench`); the
test doubles are :mod:`ctxmgmt.testing` (:mod:`ctxmgmt.app.testing`).
"""
