#!/usr/bin/env bash
# Builds Drover's OCI image from scratch with buildah: no base image, only
# the drover binary, exactly the shared libraries it loads, the Python
# client's files, and the few files a process expects (/etc/passwd, /tmp).
# Usage:
#   packaging/build-image.sh BUILD_DIR OUT_DIR [NAME]
# It commits the image to the local container storage as NAME (default
# drover:VERSION)
# (podman sees it there) and writes OUT_DIR/drover_VERSION.oci.tar, an OCI
# archive for machines without a registry (`podman load -i`). Prints the
# image's name. `make image` runs it on build/. Needs root (buildah mounts
# the image's root file system).
#
# The image's roles (docs/deploy.md, "Container image"):
#   podman run drover:VERSION                       the server, as user drover
#   podman run --init --user root drover:VERSION worker --workdir /var/lib/drover-worker ...
#                                                   a worker (root only to make
#                                                   cgroups and switch users)
#   podman exec SERVER drover status ...            a client in the server
set -euo pipefail
build=$1
out=$2
drover="$build/drover"
[ -x "$drover" ] || { echo "build-image: $drover is missing; build it first" >&2; exit 1; }
command -v buildah >/dev/null || { echo "build-image: buildah is not installed (apt-get install buildah)" >&2; exit 1; }
version=$("$drover" --version | awk '{print $NF}')
image=${3:-drover:$version}
uid=7210  # the server's account in the image; 7210 is also its port

ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
root=$(buildah mount "$ctr")

install -d -m 755 "$root/usr/bin" "$root/etc"
install -d -m 700 "$root/root"
install -d -m 1777 "$root/tmp"
install -d -m 750 -o "$uid" -g "$uid" "$root/var/lib/drover"
# The worker's task directories, as in the Debian package: traversable by
# the accounts tasks run as.
install -d -m 755 "$root/var/lib/drover-worker"
objcopy --strip-debug --strip-unneeded "$drover" "$root/usr/bin/drover"
chmod 755 "$root/usr/bin/drover"
# The Python client (`import drover`), where Debian's python3 looks, at the
# binary's version: the image holds no interpreter, but one built FROM it
# that adds python3 (and python3-cloudpickle) has the client, and its
# workers run function tasks.
src=$(cd "$(dirname "$0")/.." && pwd)
py_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/python/drover/__init__.py")
[ "$py_version" = "$version" ] || {
  echo "build-image: the Python client is version $py_version, the binary $version" >&2
  exit 1
}
install -d -m 755 "$root/usr/lib/python3/dist-packages/drover"
install -m 644 "$src"/python/drover/*.py "$src/python/drover/py.typed" \
  "$root/usr/lib/python3/dist-packages/drover/"

# Exactly what the dynamic loader maps for the binary, at the same paths,
# and the loader itself.
ldd "$drover" | awk '/=> \// {print $3} /^[ \t]*\// {print $1}' | while read -r lib; do
  install -D -m "$(stat -c %a "$(readlink -f "$lib")")" "$(readlink -f "$lib")" "$root$lib"
done

cat > "$root/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/usr/sbin/nologin
drover:x:$uid:$uid:Drover server:/var/lib/drover:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat > "$root/etc/group" <<GROUP
root:x:0:
drover:x:$uid:
nogroup:x:65534:
GROUP
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$root/etc/nsswitch.conf"

buildah config \
  --entrypoint '["/usr/bin/drover"]' \
  --cmd 'server --state-dir /var/lib/drover --bind 0.0.0.0 --port 7210' \
  --user drover \
  --workingdir /var/lib/drover \
  --env HOME=/var/lib/drover \
  --env DROVER_ACCESS=/var/lib/drover/access.json \
  --port 7210/tcp \
  --volume /var/lib/drover \
  --volume /var/lib/drover-worker \
  --label org.opencontainers.image.title=drover \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.description="Drover: server, worker and client in one binary" \
  "$ctr"
buildah umount "$ctr" >/dev/null
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
trap - EXIT
mkdir -p "$out"
rm -f "$out/drover_$version.oci.tar"
buildah push --quiet "$image" "oci-archive:$out/drover_$version.oci.tar:$image" >/dev/null
echo "$image"
