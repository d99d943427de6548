#!/bin/sh
# doxygen-filter.sh FILE -- prints FILE with its plain C comments turned into
# Doxygen comments: a comment that opens a line documents what follows it,
# and a comment after a declaration on the same line documents that
# declaration. The file's first comment (its description) stays plain.
exec awk '
  !seen_first && /^\/\*/ { in_head = 1 }
  in_head { print; if ($0 ~ /\*\//) { in_head = 0; seen_first = 1 }; next }
  { seen_first = 1 }
  /^[ \t]*\/\*[^*]/ || /^[ \t]*\/\*$/ { sub(/\/\*/, "/**") ; print; next }
  /[;,{][ \t]*\/\*[^*]/ { sub(/\/\* */, "/**< ") ; print; next }
  { print }
' "$1"
