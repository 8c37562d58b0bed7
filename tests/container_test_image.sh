#!/bin/sh
# Builds a small OCI image from scratch with buildah, for the tests and
# benchmarks of tasks in container images: no registry, no network. It
# holds this machine's (Debian's) sh and a few coreutils with exactly the
# libraries ldd names, a world-writable /tmp, and /etc/drover-test-image
# (its contents: "image-root"), a file the host has not, by which a task
# tells it runs on the image's root file system.
# Usage: container_test_image.sh IMAGE   (e.g. localhost/drover-test:1)
set -eu
image=$1
command -v buildah >/dev/null || { echo "container_test_image: buildah is not installed" >&2; exit 1; }
ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
root=$(buildah mount "$ctr")
for program in sh cat id nproc dd sleep ls echo head stat true; do
  path=$(which "$program")
  for file in "$path" $(ldd "$path" 2>/dev/null | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$file")"
    cp -L "$file" "$root$file"
  done
  # The programs are found on the image's PATH (/usr/bin, /bin).
  mkdir -p "$root/usr/bin"
  [ -e "$root/usr/bin/$program" ] || cp -L "$path" "$root/usr/bin/$program"
done
mkdir -p "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
echo image-root >"$root/etc/drover-test-image"
buildah umount "$ctr" >/dev/null
buildah config --env PATH=/usr/bin:/bin "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
trap - EXIT
