"""What a memory reads and returns: messages, turns and contexts.

Also their text bounds, dates, token budgets, and the errors every part raises.
"""
