#!/usr/bin/env bash
# Newer Vulkan headers for building ggml's Vulkan backend on Debian bookworm.
#
# The pinned ggml's ggml-vulkan.cpp uses VK_EXT_layer_settings
# (vk::LayerSettingEXT), which bookworm's libvulkan-dev (1.3.239) lacks.
# Trixie's libvulkan-dev has it. Nothing from trixie is installed: the
# package is downloaded with apt against a private sources list (this
# system's own Debian source, suite swapped to trixie; the system's apt
# state is not touched) and unpacked into a folder of its own.
#
#   scripts/vulkan-headers.sh DIR
#
# Prints DIR/usr/include (the folder to put before the system's includes).
# Does nothing but print when DIR already holds the headers. On a system
# whose own headers are new enough, prints nothing and exits 0.
set -euo pipefail
dir=${1:?usage: scripts/vulkan-headers.sh DIR}
inc=$dir/usr/include

has_layer_settings() { grep -q 'VkLayerSettingEXT' "$1/vulkan/vulkan_core.h" 2>/dev/null; }

if has_layer_settings "$inc"; then
  echo "$inc"
  exit 0
fi
if has_layer_settings /usr/include; then
  exit 0
fi

# This system's Debian source: the first one whose suite is the release's
# own codename (not -updates or -security), in deb822 or one-line form.
. /etc/os-release
codename=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
uri=""
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  uri=$(awk -v c="$codename" '
    /^[[:space:]]*$/ { if (u != "" && ok) { print u; exit } u = ""; ok = 0; next }
    /^URIs:/ { u = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c) ok = 1 }
    END { if (u != "" && ok) print u }' "$f" | head -1)
  [ -n "$uri" ] && break
done
if [ -z "$uri" ]; then
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk -v c="$codename" '$1 == "deb" { for (i = 2; i < NF; i++) if ($i !~ /^\[/ && $(i+1) == c) { print $i; exit } }' "$f")
    [ -n "$uri" ] && break
  done
fi
[ -n "$uri" ] || { echo "vulkan-headers: no Debian source for $codename found in /etc/apt" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb [signed-by=$keyring] $uri trixie main" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Get::List-Cleanup=0")
echo "vulkan-headers: fetching trixie's libvulkan-dev from $uri into $dir" >&2
apt-get "${apt_opts[@]}" update -qq >&2
(cd "$work" && apt-get "${apt_opts[@]}" download libvulkan-dev >&2)
mkdir -p "$dir.tmp"
dpkg -x "$work"/libvulkan-dev_*.deb "$dir.tmp"
has_layer_settings "$dir.tmp/usr/include" || { echo "vulkan-headers: trixie's headers lack VK_EXT_layer_settings" >&2; exit 1; }
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "$inc"
