#!/usr/bin/env bash
# Builds the Debian package of an already built drover binary, with
# dpkg-deb and nothing from the network. Usage:
#   packaging/build-deb.sh BUILD_DIR OUT_DIR
# Prints the .deb's path. `make deb` runs it on build/.
set -euo pipefail
build=$1
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
drover="$build/drover"
[ -x "$drover" ] || { echo "build-deb: $drover is missing; build it first" >&2; exit 1; }
version=$("$drover" --version | awk '{print $NF}')
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
chmod 755 "$stage"  # the root of the package: / on install
trap 'rm -rf "$stage"' EXIT
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/share/man/man1" \
  "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
  "$stage/lib/systemd/system" "$stage/etc/drover" "$stage/usr/share/doc/drover"
# The binary without its debug sections (the build keeps them).
objcopy --strip-debug --strip-unneeded "$drover" "$stage/usr/bin/drover"
chmod 755 "$stage/usr/bin/drover"
# The Python client (`import drover`), where Debian's python3 finds
# modules, at the binary's version.
py_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$root/python/drover/__init__.py")
[ "$py_version" = "$version" ] || {
  echo "build-deb: the Python client is version $py_version, the binary $version" >&2
  exit 1
}
install -d "$stage/usr/lib/python3/dist-packages/drover"
install -m 644 "$root"/python/drover/*.py "$root/python/drover/py.typed" \
  "$stage/usr/lib/python3/dist-packages/drover/"
docs=$(mktemp -d)
python3 "$root/packaging/gen_docs.py" "$stage/usr/bin/drover" "$docs"
gzip -9n -c "$docs/drover.1" > "$stage/usr/share/man/man1/drover.1.gz"
install -m 644 "$docs/drover.bash" "$stage/usr/share/bash-completion/completions/drover"
install -m 644 "$docs/_drover" "$stage/usr/share/zsh/vendor-completions/_drover"
rm -rf "$docs"
install -m 644 "$root/packaging/deb/drover-server.service" "$root/packaging/deb/drover-worker.service" \
  "$stage/lib/systemd/system/"
mkdir -p "$stage/usr/lib/systemd/user"
install -m 644 "$root/packaging/deb/drover-desktop.service" "$stage/usr/lib/systemd/user/"
install -m 644 "$root/packaging/deb/drover.toml" "$stage/etc/drover/drover.toml"
install -m 755 "$root/packaging/deb/postinst" "$root/packaging/deb/prerm" \
  "$root/packaging/deb/postrm" "$stage/DEBIAN/"
echo "/etc/drover/drover.toml" > "$stage/DEBIAN/conffiles"
# Debian's copyright file: the project's license text.
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: drover"
  echo
  echo "Files: *"
  echo "Copyright: Drover developers"
  echo "License: see the source tree"
} > "$stage/usr/share/doc/drover/copyright"
gzip -9n -c > "$stage/usr/share/doc/drover/changelog.gz" <<CHANGES
drover ($version) unstable; urgency=medium

  * Built from the source tree.

 -- Drover developers <drover-maintainers@example.org>  $(date -R -d @0)
CHANGES
# What the binary links dynamically, as package names (libc, hiredis is
# static, libstdc++ static).
depends=$(for lib in $(ldd "$stage/usr/bin/drover" | awk '/=>/ {print $3}'); do
  # dpkg knows a library by one of its paths (/lib or /usr/lib).
  for path in "$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}"; do
    dpkg -S "$path" 2>/dev/null && break
  done
done | cut -d: -f1 | sort -u | paste -sd, | sed 's/,/, /g')
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/${depends:-libc6}/" \
  "$root/packaging/deb/control.in" > "$stage/DEBIAN/control"
echo "Installed-Size: $(du -sk "$stage" | cut -f1)" >> "$stage/DEBIAN/control"
mkdir -p "$out"
deb="$out/drover_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
