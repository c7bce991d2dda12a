#!/usr/bin/env bash
# Prints the Debian archive this host's apt already uses for SUITE, so that the
# offline base image comes from the same mirror (or proxy) the site set up:
#   images/base/apt-mirror.sh [SUITE [APT_DIR]]     (defaults: bookworm, /etc/apt)
# Reads, in apt's order, APT_DIR/sources.list, then APT_DIR/sources.list.d/*.list
# (one-line format) and *.sources (deb822, the default of Debian 12), as
# sources.list(5) describes them. The first "deb" entry whose suites include
# SUITE wins; deb-src, disabled (Enabled: no) and commented-out entries do not
# count. Exits 1, naming DEBIAN_MIRROR, when no entry names SUITE.
set -euo pipefail

SUITE=${1:-bookworm}
APT_DIR=${2:-/etc/apt}

files=()
[[ -f "$APT_DIR/sources.list" ]] && files+=("$APT_DIR/sources.list")
# apt reads sources.list.d in alphanumeric order, whatever the suffix.
if [[ -d "$APT_DIR/sources.list.d" ]]; then
  mapfile -t parts < <(find "$APT_DIR/sources.list.d" -maxdepth 1 -type f \( -name '*.list' -o -name '*.sources' \) | LC_ALL=C sort)
  files+=("${parts[@]}")
fi

for f in "${files[@]}"; do
  case $f in
    *.sources)
      # deb822: stanzas separated by blank lines; field names are
      # case-insensitive; a field may continue on lines starting with a space.
      found=$(awk -v suite="$SUITE" '
        function flush() {
          split(uris, u, /[ \t]+/); uri = (u[1] != "" ? u[1] : u[2])
          if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no" && uri != "") {
            n = split(suites, s, /[ \t]+/)
            for (i = 1; i <= n; i++) if (s[i] == suite) { print uri; done = 1; exit }
          }
          types = ""; uris = ""; suites = ""; enabled = ""; uri = ""; last = ""
        }
        /^#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[ \t]/ { if (last == "uris") uris = uris " " $0; else if (last == "suites") suites = suites " " $0; next }
        {
          key = tolower(substr($0, 1, index($0, ":") - 1)); val = substr($0, index($0, ":") + 1)
          gsub(/^[ \t]+|[ \t]+$/, "", val); last = key
          if (key == "types") types = val
          else if (key == "uris") uris = val
          else if (key == "suites") suites = val
          else if (key == "enabled") enabled = val
        }
        END { if (!done) flush() }
      ' "$f")
      ;;
    *)
      # One-line: deb [ options ] uri suite [component ...]
      found=$(awk -v suite="$SUITE" '
        { sub(/#.*/, "") }
        $1 != "deb" { next }
        {
          line = $0; sub(/^[ \t]*deb[ \t]+/, "", line)
          if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)
          split(line, w, /[ \t]+/)
          if (w[2] == suite) { print w[1]; exit }
        }
      ' "$f")
      ;;
  esac
  if [[ -n "$found" ]]; then
    echo "${found%/}"
    exit 0
  fi
done

echo "images/base/apt-mirror.sh: no apt source of $APT_DIR names the suite $SUITE:" \
     "set DEBIAN_MIRROR=<a Debian mirror URL> (e.g. your site's mirror or proxy)" >&2
exit 1
