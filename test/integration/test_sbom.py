"""The image's package record (the SBOM's source): scripts/make-rootfs on the built binaries, checked
by scripts/check-sbom, and check-sbom catching what would make the SBOM wrong."""

import os
import pathlib
import shutil
import subprocess

from conftest import ROOT, aw_bin

MAKE_ROOTFS = ROOT / "scripts" / "make-rootfs"
CHECK_SBOM = ROOT / "scripts" / "check-sbom"


def make_rootfs(tmp_path):
    webhook = aw_bin()
    gateway = os.path.join(os.path.dirname(webhook), "allocation-gateway")
    rootfs = tmp_path / "rootfs"
    subprocess.run([str(MAKE_ROOTFS), webhook, gateway, str(rootfs)], check=True, capture_output=True)
    return rootfs


def check(rootfs):
    r = subprocess.run([str(CHECK_SBOM), str(rootfs)], capture_output=True, text=True)
    return r.returncode, r.stdout


def test_every_shipped_file_is_in_the_record(tmp_path):
    rootfs = make_rootfs(tmp_path)
    code, out = check(rootfs)
    assert code == 0, out
    status = rootfs / "var/lib/dpkg/status.d"
    packages = {p.name for p in status.iterdir() if not p.name.endswith(".md5sums")}
    # What the binaries link and the CA bundle: the libraries named in docs/design.md's dependencies.
    for want in ("libc6", "libssl3", "libstdc++6", "libnghttp2-14", "libprotobuf32", "libfmt9",
                 "libyaml-cpp0.7", "libprometheus-cpp-core1.0", "ca-certificates"):
        assert want in packages, f"{want} missing from {sorted(packages)}"
    assert "Version: " in (status / "libssl3").read_text()


def test_check_sbom_catches_a_wrong_record(tmp_path):
    rootfs = make_rootfs(tmp_path)
    status = rootfs / "var/lib/dpkg/status.d"
    # A file no package of the record owns.
    extra = rootfs / "lib/x86_64-linux-gnu/libextra.so.1"
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_bytes(b"not from a package")
    code, out = check(rootfs)
    assert code == 1 and "libextra.so.1: shipped, owned by no package" in out, out
    extra.unlink()
    # A shipped file changed after the record was written.
    listed = (status / "libfmt9.md5sums").read_text().split("  ", 1)[1].strip()
    with open(rootfs / listed, "ab") as f:
        f.write(b"\0")
    code, out = check(rootfs)
    assert code == 1 and f"{listed}: MD5" in out, out
    # A package's stanza gone: its files are owned by nothing.
    shutil.rmtree(rootfs)
    rootfs = make_rootfs(tmp_path)
    (rootfs / "var/lib/dpkg/status.d/zlib1g").unlink()
    code, out = check(rootfs)
    assert code == 1 and "zlib1g.md5sums: no status stanza" in out, out
    assert pathlib.Path(rootfs / "var/lib/dpkg/status.d/libc6").exists()
