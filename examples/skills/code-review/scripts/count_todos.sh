#!/bin/sh
# Count the TODO comments a unified diff adds: sh count_todos.sh < change.diff
added=$(grep '^+' | grep -v '^+++' | grep -w 'TODO')
total=$(printf '%s' "$added" | grep -c .)
untracked=$(printf '%s' "$added" | grep -v '#[0-9]' | grep -c .)
echo "$total TODO(s) added, $untracked without an issue number"
