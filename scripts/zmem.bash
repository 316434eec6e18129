# bash completion for zmem.  The commands come from "zmem help" and each
# command's options from "zmem COMMAND --help", which the command
# generates from the table that parses them, so this file never needs to
# follow them.  Installed by make install as
# share/bash-completion/completions/zmem; in the tree: . scripts/zmem.bash
_zmem()
{
    local cur prev cmd words
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        words=$("${COMP_WORDS[0]}" help 2>/dev/null |
                sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')
        mapfile -t COMPREPLY < <(compgen -W "$words help --help --version" -- "$cur")
        return
    fi
    cmd=${COMP_WORDS[1]}
    if [ "$cmd" = help ]; then
        [ "$COMP_CWORD" -eq 2 ] || return
        words=$("${COMP_WORDS[0]}" help 2>/dev/null |
                sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
        return
    fi
    if [ "$cmd" = list ] && { [ "$prev" = -o ] || [ "$prev" = --output ]; }; then
        # list's columns, from the table after "Columns:" in its --help
        words=$("${COMP_WORDS[0]}" list --help 2>/dev/null |
                sed -n '/^Columns:/,/^$/s/^  \([A-Z][A-Z-]*\) .*/\1/p')
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "${cur#+}")
        [ "${cur#+}" = "$cur" ] || COMPREPLY=("${COMPREPLY[@]/#/+}")
        return
    fi
    case $prev in
        -o|--output|--plot|--corpus|--backing|--pidfile|--socket|--control)
            mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
        --dir|--files)
            mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return ;;
    esac
    if [[ $cur == -* ]]; then
        words=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null |
                grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    fi
}
complete -o default -F _zmem zmem
