"""README.md stays true: its Python example runs, and .ci/run runs README's test command."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    return open(os.path.join(ROOT, "README.md")).read()


def test_readme_example_runs(monkeypatch, tmp_path):
    block = re.search(r"## One kernel\n\n```python\n(.*?)```", _readme(), re.S).group(1)
    path = tmp_path / "readme_example.py"  # kernels need a real source file
    path.write_text(block)
    code = compile(block, str(path), "exec")
    ns = {"__name__": "readme_example"}
    exec(code, ns)
    assert "LDG.E.128" in ns["ck"].asm["sass"]


def test_ci_runs_readme_test_command():
    readme = _readme()
    cmds = re.search(r"## Two commands.*?```bash\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    install = cmds[0].split("#")[0].strip().split("&&")[0].strip()
    test = cmds[1].split("#")[0].strip()
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert test in ci.splitlines()
    assert install.replace("python3 -m pip install", "").strip() in ci
