"""One conversation over time.

Its history in core form, derived state kept in step with a store, the background index, and the
one selection step every surface runs.
"""
