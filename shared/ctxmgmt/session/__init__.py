"""One conversation over time: what every adapter calls, once per framework call.

Read top to bottom, in the order a select call passes through them:

- :mod:`~ctxmgmt.session.pool`: live conversations by the framework's id, and their store keys;
- :mod:`~ctxmgmt.session.conversation`: one conversation (its lock, its calls);
- :mod:`~ctxmgmt.session.converted`: the caller's messages in core form, read once per call;
- :mod:`~ctxmgmt.session.query`: which turn is in progress and what the question is;
- :mod:`~ctxmgmt.session.stored_state`: derived state kept in step with a store (and the story of
  what is stored, where, under which key, and how a restart finds it);
- :mod:`~ctxmgmt.session.backlog`: a fast index over turns not derived yet;
- :mod:`~ctxmgmt.session.selection` (with :mod:`~ctxmgmt.session.layout`): composing the context;
- :mod:`~ctxmgmt.session.codec`: the context back as the caller's own objects.

Beside the path: :mod:`~ctxmgmt.session.worker` (the background worker and process hooks) and
:mod:`~ctxmgmt.session.memory` (a memory without a framework).
"""
