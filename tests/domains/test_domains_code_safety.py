"""Static checks: the allowlist judges root packages, and dynamic-import / reflection escapes are refused."""

import pytest

from propel.domains.code.safety import check_source

GOOD = [
    "def f(x):\n    return x + 1\n",
    "import math\ndef f(x):\n    return math.sqrt(x)\n",
    "from collections import Counter\ndef f(s):\n    return dict(Counter(s))\n",
    "import collections.abc\ndef f(x):\n    return isinstance(x, collections.abc.Sequence)\n",
    "def f(x):\n    return getattr(x, 'real')\n",
    "LIMIT = 3\ndef helper(y):\n    return y * 2\ndef f(x):\n    return helper(x) % LIMIT\n",
]

BAD = [
    ("import os\ndef f(x):\n    return os.system('ls')\n", "banned_import:os"),
    ("import os.path\ndef f(x):\n    return x\n", "banned_import:os.path"),
    ("from os import path\ndef f(x):\n    return x\n", "banned_import:os"),
    ("import math, subprocess\ndef f(x):\n    return x\n", "banned_import:subprocess"),
    ("import random\ndef f(x):\n    return random.random()\n", "banned_import:random"),
    ("import importlib\ndef f(x):\n    return x\n", "banned_import:importlib"),
    ("def f(x):\n    return __import__('os').getcwd()\n", "banned_call:__import__"),
    ("def f(x):\n    return eval(x)\n", "banned_call:eval"),
    ("def f(x):\n    exec('y=1')\n    return x\n", "banned_call:exec"),
    ("def f(x):\n    return open('/etc/passwd').read()\n", "banned_call:open"),
    ("def f(x):\n    return ().__class__.__bases__[0].__subclasses__()\n", "dunder:__subclasses__"),
    ("def f(x):\n    return getattr(x, '__class__')\n", "dynamic_getattr"),
    ("def f(x, n):\n    return getattr(x, n)\n", "dynamic_getattr"),
    ("import operator\ndef f(x):\n    return operator.attrgetter('__class__')(x)\n", "dunder_string"),
    ("def f(x):\n    return __builtins__\n", "dunder:__builtins__"),
    ("from . import x\ndef f(y):\n    return y\n", "banned_import:."),
    ("def f(x):\n    return id(x)\n", "banned_call:id"),
    ("print('hi')\ndef f(x):\n    return x\n", "top_level_statement"),
    ("def g(x):\n    return x\n", "no_function_f"),
    ("def f(x)\n    return x\n", "syntax_error"),
]


@pytest.mark.parametrize("source", GOOD)
def test_accepts_plain_code(source):
    assert check_source(source) is None


@pytest.mark.parametrize(("source", "reason"), BAD)
def test_refuses_escapes(source, reason):
    assert check_source(source) == reason
