"""A PEP 517 build backend of a few lines, in the package itself, so that
`pip install ./python/cordon-adapters` needs no network (no setuptools or wheel to fetch
into pip's isolated build environment). It packs `src/cordon_adapters` into a pure-Python
wheel with the metadata of pyproject.toml's [project] table.
"""

import base64
import hashlib
import os
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.abspath(__file__))
TAG = "py3-none-any"


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}",
             f"Requires-Python: {project.get('requires-python', '>=3')}"]
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {dep}; extra == "{extra}"' for dep in deps]
    return "\n".join(lines) + "\n"


def _dist_info(project):
    return f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    info = os.path.join(metadata_directory, _dist_info(project))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(_metadata(project))
    return _dist_info(project)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    name = f"{project['name'].replace('-', '_')}-{project['version']}-{TAG}.whl"
    info = _dist_info(project)
    files = []
    src = os.path.join(ROOT, "src")
    for folder, _, names in os.walk(os.path.join(src, "cordon_adapters")):
        for file in sorted(names):
            if file.endswith(".py") or file == "py.typed":
                path = os.path.join(folder, file)
                with open(path, "rb") as f:
                    files.append((os.path.relpath(path, src), f.read()))
    files.append((f"{info}/METADATA", _metadata(project).encode()))
    files.append((f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: cordon\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()))
    record = [_record_line(n, d) for n, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for n, d in files:
            wheel.writestr(n, d)
    return name
