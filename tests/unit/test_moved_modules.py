"""Old module names (before the parts layout) still import, as the moved modules themselves."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import ctxmgmt
from ctxmgmt import MOVED_MODULES


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_name_is_the_moved_module(old: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED_MODULES[old])


def test_a_setting_made_through_an_old_name_reaches_the_code_that_reads_it() -> None:
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import ctxmgmt.conversation\n"
        "import ctxmgmt.session.conversation as new\n"
        "ctxmgmt.conversation.INDEX_SECONDS = 7.5\n"
        "assert new.INDEX_SECONDS == 7.5\n"
        "assert ctxmgmt.conversation.Conversation.__module__ == 'ctxmgmt.session.conversation'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_every_old_name_but_the_kept_ones_warns_in_a_fresh_process() -> None:
    code = (
        "import importlib, warnings\n"
        "from ctxmgmt import MOVED_MODULES\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for old in MOVED_MODULES:\n"
        "        importlib.import_module(old)\n"
        "    from ctxmgmt.adapter import plain_data\n"
        "for w in caught:\n"
        "    if w.category is DeprecationWarning:\n"
        "        print(str(w.message).split(' ')[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    warned = set(done.stdout.split())
    assert warned == (set(MOVED_MODULES) - ctxmgmt.KEPT_NAMES) | {"ctxmgmt.adapter.plain_data"}


def test_the_adapter_part_forwards_only_names_its_kit_has() -> None:
    import ctxmgmt.adapter

    with pytest.raises(AttributeError):
        ctxmgmt.adapter.no_such_name  # noqa: B018
