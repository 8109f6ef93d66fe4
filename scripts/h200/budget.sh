# Sourced by the H200 scripts that share one call's time out between phases: a phase may take
# what it wants or what is left of $BUDGET_S seconds (at least 30), counted from $STARTED, and
# each check appends one line to $RESULTS.
allowed() {
    local left=$((BUDGET_S - ($(date +%s) - STARTED)))
    [ "$left" -lt 30 ] && left=30
    [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
result() { echo "$1" >> "$RESULTS"; }
