# A pod's files for the Kubernetes provider (ADR 40): run as `sh -c "<this file>" berth-files OP ARGS`
# over the exec API, where no launcher runs. Paths are resolved inside the pod (realpath: symlinks
# followed) and must stay under the workspace; `entry` resolves the directory a path is in but not
# its last part (remove, move and mkdir act on a link itself).
#
# Paths given are under /workspace, which is the workspace's place in a pod; BERTH_WORKSPACE moves it
# (the test cluster's exec runs on its host). Operations (an entry is six NUL-terminated fields: type
# letter of find, size, octal mode, mtime in seconds, path relative to the workspace as `./…`,
# symlink target):
#   stat PATH                    one entry
#   list PATH                    the directory's entries
#   read PATH                    its entry, then the file's bytes
#   tar PATH                     its entry, then a tar of the directory (members ./…)
#   receive PATH NONCE PARENTS   stdin into a hidden file beside PATH (nothing at PATH yet)
#   commit PATH NONCE MODE       that file renamed over PATH, then its entry
#   discard PATH NONCE           that file removed (an upload given up)
#   mkdir PATH PARENTS           the directory, then its entry
#   remove PATH RECURSIVE
#   move PATH TO OVERWRITE       then the entry at TO
# Exit status: 0 done; 3 outside; 4 not_found; 5 exists; 6 not_directory; 7 is_directory;
# 8 not_empty; 9 io_error; 10 bad_request; the reason on stderr.
set -u
root=$(realpath -e -- "${BERTH_WORKSPACE:-/workspace}") || { echo "no workspace" >&2; exit 9; }
op=$1

# A path of the API (under /workspace) at the workspace's place here.
here() {
  case "$1" in
    /workspace | /workspace/*) printf '%s' "$root${1#/workspace}" ;;
    *) printf '%s' "$1" ;;
  esac
}
path=$(here "$2")

fail() {
  printf '%s\n' "$2" >&2
  exit "$1"
}

inside() {
  case "$1" in
    "$root" | "$root"/*) return 0 ;;
  esac
  return 1
}

resolved() {
  real=$(realpath -m -- "$1") || fail 9 "$1: cannot be resolved"
  inside "$real" || fail 3 "$1 is outside the workspace (symlinks resolved)"
  printf '%s' "$real"
}

entry() {
  parent=$(realpath -m -- "$(dirname -- "$1")") || fail 9 "$1: cannot be resolved"
  real="${parent%/}/$(basename -- "$1")"
  inside "$real" || fail 3 "$1 is outside the workspace (symlinks resolved)"
  printf '%s' "$real"
}

exists() {
  [ -e "$1" ] || [ -L "$1" ]
}

# Entries with paths relative to the workspace (`.`, `./a/b`), whatever its place here.
describe() {
  (cd "$root" && find ".${1#"$root"}" -maxdepth 0 -printf '%y\0%s\0%m\0%T@\0%p\0%l\0')
}

entries() {
  (cd "$root" && find ".${1#"$root"}" -mindepth 1 -maxdepth 1 -printf '%y\0%s\0%m\0%T@\0%p\0%l\0')
}

upload() {
  printf '%s/.berth-upload-%s' "$(dirname -- "$1")" "$2"
}

case "$op" in
  stat)
    p=$(resolved "$path") || exit
    exists "$p" || fail 4 "$path: No such file or directory"
    describe "$p"
    ;;
  list)
    p=$(resolved "$path") || exit
    exists "$p" || fail 4 "$path: No such file or directory"
    [ -d "$p" ] || fail 6 "$path is not a directory"
    entries "$p"
    ;;
  read)
    p=$(resolved "$path") || exit
    exists "$p" || fail 4 "$path: No such file or directory"
    [ -d "$p" ] && fail 7 "$path is a directory (ask for its tar)"
    [ -r "$p" ] || fail 9 "$path cannot be read"
    describe "$p"
    exec cat -- "$p"
    ;;
  tar)
    p=$(resolved "$path") || exit
    exists "$p" || fail 4 "$path: No such file or directory"
    [ -d "$p" ] || fail 6 "$path is not a directory"
    describe "$p"
    # 1: a file changed while it was read (a program still writing it); the archive is whole. A
    # file that goes away meanwhile is left out (--ignore-failed-read), not the end of the archive.
    tar -c -f - --ignore-failed-read -C "$p" .
    [ $? -le 1 ] || exit 9
    ;;
  receive)
    p=$(resolved "$path") || exit
    [ -d "$p" ] && fail 7 "$path is a directory"
    parent=$(dirname -- "$p")
    [ "$4" = 1 ] && { mkdir -p -- "$parent" || fail 9 "$parent cannot be made"; }
    [ -d "$parent" ] || fail 4 "$(dirname -- "$path"): No such file or directory"
    cat >"$(upload "$p" "$3")" || { rm -f -- "$(upload "$p" "$3")"; fail 9 "$path: the write failed (is the workspace full?)"; }
    ;;
  commit)
    p=$(resolved "$path") || exit
    temp=$(upload "$p" "$3")
    [ -f "$temp" ] || fail 9 "$path: the upload is gone"
    chmod "$4" -- "$temp" && mv -f -- "$temp" "$p" || fail 9 "$path: the upload could not be put in place"
    describe "$p"
    ;;
  discard)
    p=$(resolved "$path") || exit
    rm -f -- "$(upload "$p" "$3")"
    ;;
  mkdir)
    p=$(entry "$path") || exit
    if exists "$p"; then
      [ "$3" = 1 ] && [ -d "$p" ] || fail 5 "$path: File exists"
    else
      if [ "$3" = 1 ]; then mkdir -p -- "$p"; else
        [ -d "$(dirname -- "$p")" ] || fail 4 "$(dirname -- "$path"): No such file or directory"
        mkdir -- "$p"
      fi || fail 9 "$path: cannot be made"
    fi
    describe "$(resolved "$p")"
    ;;
  remove)
    p=$(entry "$path") || exit
    [ "$p" = "$root" ] && fail 10 "the workspace itself cannot be removed"
    exists "$p" || fail 4 "$path: No such file or directory"
    if [ -d "$p" ] && [ ! -L "$p" ]; then
      if [ "$3" = 1 ]; then rm -rf -- "$p" || fail 9 "$path: cannot be removed"; else
        [ -z "$(find "$p" -mindepth 1 -maxdepth 1 -print -quit)" ] || fail 8 "$path: Directory not empty"
        rmdir -- "$p" || fail 9 "$path: cannot be removed"
      fi
    else
      rm -f -- "$p" || fail 9 "$path: cannot be removed"
    fi
    ;;
  move)
    p=$(entry "$path") || exit
    to=$(entry "$(here "$3")") || exit
    exists "$p" || fail 4 "$path: No such file or directory"
    exists "$to" && [ "$4" != 1 ] && fail 5 "$3 exists"
    [ -d "$(dirname -- "$to")" ] || fail 4 "$(dirname -- "$3"): No such file or directory"
    mv -f -T -- "$p" "$to" || fail 9 "$path: cannot be moved"
    describe "$to"
    ;;
  *)
    fail 10 "unknown operation $op"
    ;;
esac
