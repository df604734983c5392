"""The container image without a container engine: the Dockerfile's promises read from the file,
and its install step (docker/install.sh, which `make install` runs too) run in a fresh venv."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import yaml
from processes import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined), split into build stages."""
    lines = re.sub(r"\\\n\s*", " ", DOCKERFILE).splitlines()
    found: list[list[str]] = []
    for line in (line.strip() for line in lines):
        if line.startswith("FROM "):
            found.append([])
        if found and line and not line.startswith("#"):
            found[-1].append(line)
    return found


def test_the_image_is_multi_stage_pinned_non_root_and_drains_on_sigterm():
    build, final = stages()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.M)[1]
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base)
    assert "RUN sh docker/install.sh /opt/aigw ." in build
    assert "COPY --from=build /opt/aigw /opt/aigw" in final
    assert not [line for line in final if re.search(r"gcc|build-essential|apt-get", line)]
    [user] = [line for line in final if line.startswith("USER ")]
    assert re.fullmatch(r"USER [1-9]\d{3,}:[1-9]\d{3,}", user)  # numeric: runAsNonRoot can check
    assert 'ENTRYPOINT ["aigw"]' in final and 'CMD ["run", "--config", "/etc/aigw/aigw.yaml"]' \
        in final
    assert "STOPSIGNAL SIGTERM" in final
    assert "PYTHONDONTWRITEBYTECODE=1" in " ".join(final)  # a read-only root filesystem


def test_make_install_runs_the_image_s_install_step():
    makefile = (ROOT / "Makefile").read_text()
    assert "sh docker/install.sh $(VENV) -e '.[dev]'" in makefile


def test_the_build_context_holds_what_the_dockerfile_copies():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = {source for line in DOCKERFILE.splitlines() if line.startswith("COPY ")
              and "--from" not in line for source in line.split()[1:-1]}
    assert copied <= kept


def test_the_install_step_in_a_fresh_venv_gives_a_working_aigw(tmp_path: Path):
    source = tmp_path / "src"  # the build context, as the Dockerfile copies it
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "gateway", source / "gateway",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (source / "docker").mkdir()
    shutil.copy(ROOT / "docker" / "install.sh", source / "docker" / "install.sh")

    venv = tmp_path / "opt-aigw"
    # The exact step, with --no-deps: the dependencies come from the test venv (below), which
    # `pip check` then proves satisfy the package's requirements.
    subprocess.run(["sh", "docker/install.sh", str(venv), "--no-deps", "."], cwd=source,
                   env={**os.environ, "PYTHON": sys.executable}, check=True,
                   capture_output=True, timeout=300)  # the environment keeps the pip cache
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "zz-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python, aigw = venv / "bin" / "python", venv / "bin" / "aigw"

    where = subprocess.run([python, "-c", "import gateway; print(gateway.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(str(site))  # the installed copy, not the working tree
    checked = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "validate" in subprocess.run([aigw, "--help"], capture_output=True, text=True,
                                        check=True, cwd=tmp_path).stdout
    config = tmp_path / "aigw.yaml"
    config.write_text(yaml.safe_dump({"version": 1, "upstreams": {
        "app": {"url": "http://127.0.0.1:8000"}}, "default_upstream": "app"}))
    validated = subprocess.run([aigw, "validate", str(config)], capture_output=True, text=True,
                               cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    schema = subprocess.run([aigw, "schema"], capture_output=True, text=True, cwd=tmp_path)
    assert schema.returncode == 0 and '"upstreams"' in schema.stdout  # package data shipped
