"""Run commands in a network namespace with loopback alone (``unshare -n``).

Ray looks up an outward address when it starts, and tests must never touch the network:
a local Ray is only ever started inside such a namespace, and tests that need one skip
where it cannot be made (no ``unshare`` or ``ip``, or no right to make a namespace).
"""

import shlex
import shutil
import subprocess


def isolated() -> bool:
    """Whether this process may run commands in a network namespace with loopback up."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "-n", "sh", "-c", "ip link set lo up"]
    return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0


def run_isolated(cmd: list[str], env: dict[str, str], timeout: int = 600):
    """Run ``cmd`` in a fresh network namespace with loopback up; the completed process."""
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", f"ip link set lo up; exec {shlex.join(cmd)}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
