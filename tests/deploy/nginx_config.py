"""docs/deploy/nginx/cordon.conf.template rendered into a private nginx prefix: what
tests/deploy/validate.py checks with `nginx -t` and tests/e2e/replicas.py runs in front of
its replicas. Nothing touches the system's /etc/nginx, and any user can run it (no `user`
directive, every path inside the prefix, logs on stderr)."""

import os
import pathlib
import shutil
import subprocess

TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "docs/deploy/nginx/cordon.conf.template"
# The variables the template names, exactly as envsubst is told to substitute them.
VARIABLES = ("CORDON_LISTEN", "CORDON_REPLICAS")
INSTALL = "apt-get install -y nginx"

# The main configuration around the template (an `http {}`-level file), as a host's
# /etc/nginx/nginx.conf or the official image's would hold it, with every path relative
# to the prefix.
MAIN = """\
daemon off;
worker_processes 1;
pid nginx.pid;
error_log stderr warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path tmp/client_body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    include cordon.conf;
}
"""


def nginx_binary():
    """Debian's nginx, which is in /usr/sbin (often not on a user's PATH)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise SystemExit(f"nginx is not installed: run `{INSTALL}` (tests/bootstrap.sh does)")
    return found


def render(listen, replicas, template=TEMPLATE):
    """The template with its variables set, as `envsubst '${CORDON_LISTEN}
    ${CORDON_REPLICAS}'` writes it: `replicas` are `host:port` strings."""
    text = pathlib.Path(template).read_text()
    values = {
        "CORDON_LISTEN": listen,
        "CORDON_REPLICAS": " ".join(f"server {address};" for address in replicas),
    }
    for name in VARIABLES:
        placeholder = "${" + name + "}"
        if placeholder not in text:
            raise AssertionError(f"{template} no longer names ${{{name}}}")
        text = text.replace(placeholder, values[name])
    return text


def prepare(prefix, listen, replicas, template=TEMPLATE):
    """Writes conf/nginx.conf and conf/cordon.conf under `prefix`; returns the arguments
    that point nginx at them (`nginx ARGS` serves, `nginx -t ARGS` checks)."""
    prefix = pathlib.Path(prefix)
    conf = prefix / "conf"
    (prefix / "tmp").mkdir(parents=True, exist_ok=True)
    conf.mkdir(exist_ok=True)
    (conf / "nginx.conf").write_text(MAIN)
    (conf / "cordon.conf").write_text(render(listen, replicas, template))
    # As root, nginx's workers run as `nobody` and must reach the temporary files' folder.
    os.chmod(prefix, 0o755)
    # `-e stderr`: the error log named at build time (/var/log/nginx) is never opened.
    return ["-p", f"{prefix}/", "-c", str(conf / "nginx.conf"), "-e", "stderr"]


def check(prefix, listen, replicas, template=TEMPLATE):
    """`nginx -t` on the rendered template; returns (ok, nginx's output)."""
    args = prepare(prefix, listen, replicas, template)
    done = subprocess.run([nginx_binary(), "-t", *args], capture_output=True, text=True,
                          timeout=60)
    return done.returncode == 0, done.stdout + done.stderr
