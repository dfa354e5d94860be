# bash completion for perfd(8) - installed as
# /usr/share/bash-completion/completions/perfd: its long options, as
# `perfd --help` lists them (bash-completion's _longopt reads them there).
complete -F _longopt perfd
