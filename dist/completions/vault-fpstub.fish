function __vault-fpstub_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __vault-fpstub_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __vault-fpstub_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __vault-fpstub_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __vault-fpstub_parse_tokens -S
    set -l unparsed_tokens (__vault-fpstub_tokens -pc)
    switch $unparsed_tokens[1]
    case 'vault-fpstub'
        __vault-fpstub_parse_subcommand 0 'state=' 'h/help'
        switch $unparsed_tokens[1]
        case 'plug'
            __vault-fpstub_parse_subcommand 0 'state=' 'h/help'
        case 'unplug'
            __vault-fpstub_parse_subcommand 0 'state=' 'h/help'
        case 'enroll-finger'
            __vault-fpstub_parse_subcommand 1 'state=' 'h/help'
        case 'remove-finger'
            __vault-fpstub_parse_subcommand 1 'state=' 'h/help'
        case 'list'
            __vault-fpstub_parse_subcommand 0 'state=' 'json' 'h/help'
        case 'next'
            __vault-fpstub_parse_subcommand 2 'state=' 'h/help'
        case 'clear'
            __vault-fpstub_parse_subcommand 0 'state=' 'h/help'
        case 'reset'
            __vault-fpstub_parse_subcommand 0 'state=' 'h/help'
        case 'help'
            __vault-fpstub_parse_subcommand -r 1 
        end
    end
end

function __vault-fpstub_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __vault-fpstub_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __vault-fpstub_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __vault-fpstub_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__vault-fpstub_tokens -p)
    if test -z "$(__vault-fpstub_tokens -t)"
        set -l index (count (__vault-fpstub_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'vault-fpstub' -f
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'plug' -d 'Plug the reader in (creates an empty reader if there is none).'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'unplug' -d 'Unplug the reader (its fingers and queue are kept).'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'enroll-finger' -d 'Enroll a finger with a new template (again, if it is enrolled already: that changes the enrollment).'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'remove-finger' -d 'Remove an enrolled finger.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'list' -d 'Show the reader: plugged in or not, fingers, queued scans.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'next' -d 'Queue the outcome of a coming scan (several calls queue in order).'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'clear' -d 'Empty the queue of scripted scans.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'reset' -d 'Remove the reader\'s state: no reader, no fingers, no queue.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_positional "vault-fpstub" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub plug" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub plug" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub unplug" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub unplug" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub enroll-finger" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub enroll-finger" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub remove-finger" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub remove-finger" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub list" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub list" json' -l 'json' -d 'Print JSON.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub next" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub next" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub clear" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub clear" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub reset" state' -l 'state' -d 'The stub reader\'s state file.' -rfka ''
complete -c 'vault-fpstub' -n '__vault-fpstub_should_offer_completions_for_flags_or_options "vault-fpstub reset" h help' -s 'h' -l 'help' -d 'Show help information.'
