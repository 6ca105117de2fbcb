"""The decider package (``ctxmgmt.components.decider``): every public name of its modules re-exported.

The modules have their own files: ``test_decider_decisions.py``, ``test_decider_embedded.py``,
``test_decider_llm.py``.
"""

from __future__ import annotations


def test_the_package_re_exports_every_public_name():
    import ctxmgmt.components.decider as package
    from ctxmgmt.components.decider import decisions, embedded, llm

    for module in (decisions, embedded, llm):
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and getattr(value, "__module__", module.__name__) == module.__name__
            and not isinstance(value, type(package))
            and name not in ("annotations", "logger")
        }
        assert public, module.__name__
        missing = sorted(name for name in public if getattr(package, name, None) is not getattr(module, name))
        assert not missing, (module.__name__, missing)
    assert set(package.__all__) <= set(dir(package))
