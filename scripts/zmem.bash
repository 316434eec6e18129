# bash completion for zmem.  The commands come from "zmem help", each
# command's options from the lines of "zmem COMMAND --help" that start an
# option (not from words its help text mentions), and ctl's verbs from
# "zmem ctl --help", which the command generates from the tables that
# parse them, so this file never needs to follow them.  The values of
# options are completed too: codecs and allocators (from "zmem help
# codecs", "zmem help allocators" and the hidden "zmem CMD --choices
# --OPTION": the names of this build), data sets, the choices
# --help writes as a|b, list's columns; and ctl's verbs and their first
# argument.  Installed by make install as
# share/bash-completion/completions/zmem; in the tree: . scripts/zmem.bash

# _zmem_opts ZMEM ARGS...: the long options of zmem ARGS --help
_zmem_opts()
{
    "$@" --help 2>/dev/null |
        sed -n 's/^  \(-., \|    \)\(--[a-z0-9-]*\).*/\2/p'
}

# _zmem_arg ZMEM ARGS... -- OPTION: the value's name OPTION takes in
# zmem ARGS --help ("NAME", "pools|all"), empty for a flag
_zmem_arg()
{
    local opt=${*: -1}
    "${@:1:$#-2}" --help 2>/dev/null |
        sed -n "s/^  \(-., \|    \)\(${opt}\|--[a-z0-9-]*\)\( \([^ ]*\)\)\{0,1\}.*/\2 \4/p" |
        awk -v o="$opt" '$1 == o { print $2; exit }'
}

# _zmem_verbs ZMEM [run]: ctl's verbs for a server, from the lines under
# "Verbs:" in its help; with run, those of a zmem run ("Verbs of a zmem
# run")
_zmem_verbs()
{
    local head="^Verbs:"
    [ "${2:-}" = run ] && head="^Verbs of a zmem run"
    "$1" ctl --help 2>/dev/null |
        awk -v h="$head" '$0 ~ h { on = 1; next } /^[^ ]/ { on = 0 } on' |
        sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' | sort -u
}

_zmem()
{
    local cur prev cmd words zmem opt arg i verb long
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    zmem=${COMP_WORDS[0]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        words=$("$zmem" help 2>/dev/null |
                sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')
        mapfile -t COMPREPLY < <(compgen -W "$words help --help --version" -- "$cur")
        return
    fi
    cmd=${COMP_WORDS[1]}
    if [ "$cmd" = help ]; then
        [ "$COMP_CWORD" -eq 2 ] || return
        words=$("$zmem" help 2>/dev/null |
                sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
        return
    fi
    # allocbench --latency is a command of its own, with its own options
    local -a sub=("$cmd")
    if [ "$cmd" = allocbench ]; then
        for w in "${COMP_WORDS[@]:2}"; do
            [ "$w" = --latency ] && sub=(allocbench --latency)
        done
    fi
    # the option whose value is completed: "--opt VALUE" or "--opt=VALUE"
    opt="" arg=""
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*}
        cur=${cur#*=}
    elif [[ $prev == -* ]]; then
        opt=$prev
    fi
    if [ -n "$opt" ]; then
        long=$opt
        if [[ $opt != --* ]]; then  # -a: its long name, from --help
            long=$("$zmem" "${sub[@]}" --help 2>/dev/null |
                   sed -n "s/^  ${opt}, \(--[a-z0-9-]*\).*/\1/p")
        fi
        [ -n "$long" ] && arg=$(_zmem_arg "$zmem" "${sub[@]}" -- "$long")
    fi
    if [ -n "$arg" ]; then
        words=""
        case $cmd:$long in
            list:--output)
                # list's columns, from the table after "Columns:" in its help
                words=$("$zmem" list --help 2>/dev/null |
                        sed -n '/^Columns:/,/^$/s/^  \([A-Z][A-Z-]*\) .*/\1/p')
                mapfile -t COMPREPLY < <(compgen -W "$words" -- "${cur#+}")
                [ "${cur#+}" = "$cur" ] || COMPREPLY=("${COMPREPLY[@]/#/+}")
                return ;;
            *:--codec|*:--recompress)
                # the codecs of this build
                words=$("$zmem" help codecs 2>/dev/null) ;;
            *:--allocator|*:--allocators)
                # the command's own list where it has one (churn's, which
                # has the C library's allocators too), else the pool's
                words=$("$zmem" "${sub[@]}" --choices "$long" 2>/dev/null)
                [ -n "$words" ] || words=$("$zmem" help allocators 2>/dev/null) ;;
            *:--data)
                if [[ $cur == file:* ]]; then
                    mapfile -t COMPREPLY < <(compgen -f -- "${cur#file:}")
                    COMPREPLY=("${COMPREPLY[@]/#/file:}")
                    return
                fi
                words="zero text text: random random: memory file: capture:" ;;
            gen:--kind)
                words="zero random text memory" ;;
            *:--output|*:--plot|*:--corpus|*:--backing|*:--pidfile|*:--socket|\
            *:--control|*:--stats-file)
                mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
            *:--dir|*:--files|*:--prog-dir)
                mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return ;;
            *)
                # choices written a|b|c in --help
                [[ $arg == *\|* && $arg != *[A-Z]* ]] && words=${arg//|/ } ;;
        esac
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
        # a prefix such as text: or file: goes on without a space
        if [ "${#COMPREPLY[@]}" -eq 1 ] && [[ ${COMPREPLY[0]} == *: ]]; then
            compopt -o nospace 2>/dev/null
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        words=$(_zmem_opts "$zmem" "${sub[@]}")
        mapfile -t COMPREPLY < <(compgen -W "$words --help --quiet" -- "$cur")
        return
    fi
    if [ "$cmd" = ctl ]; then
        # the first operand that is a verb; none yet: offer the verbs
        verb=""
        words=$(_zmem_verbs "$zmem")
        for ((i = 2; i < COMP_CWORD; i++)); do
            [[ ${COMP_WORDS[i]} == run || ${COMP_WORDS[i]} == run:* ]] &&
                words=$(_zmem_verbs "$zmem" run)
        done
        for ((i = 2; i < COMP_CWORD; i++)); do
            for w in $words; do
                [ "${COMP_WORDS[i]}" = "$w" ] && { verb=$w; break 2; }
            done
        done
        if [ -z "$verb" ]; then
            mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
            return
        fi
        [ "$prev" = "$verb" ] || return
        case $verb in
            writeback) words="idle huge huge_idle incompressible all page" ;;
            recompress) words="idle huge huge_idle all" ;;
            idle) words="all" ;;
            mem-limit) words="none" ;;
            *) return ;;
        esac
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    fi
}
complete -o default -F _zmem zmem
