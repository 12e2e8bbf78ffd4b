function __vaultd_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __vaultd_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __vaultd_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __vaultd_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __vaultd_parse_tokens -S
    set -l unparsed_tokens (__vaultd_tokens -pc)
    switch $unparsed_tokens[1]
    case 'vaultd'
        __vaultd_parse_subcommand 0 'socket=' 'data-dir=' 'config=' 'keyring=' 'idle-timeout=' 'log-level=' 'demo' 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'help'
            __vaultd_parse_subcommand -r 1 'version'
        end
    end
end

function __vaultd_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __vaultd_parse_subcommand -S -a positional_count
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

function __vaultd_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __vaultd_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__vaultd_tokens -p)
    if test -z "$(__vaultd_tokens -t)"
        set -l index (count (__vaultd_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'vaultd' -f
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" socket' -l 'socket' -d 'Socket path (default: $XDG_RUNTIME_DIR/sessionvault/vault.sock, or SESSIONVAULT_SOCKET).' -rfka ''
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" data-dir' -l 'data-dir' -d 'Data directory (default: $XDG_DATA_HOME/sessionvault, or SESSIONVAULT_DATA_DIR).' -rfka ''
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" config' -l 'config' -d 'Your config file (default: $XDG_CONFIG_HOME/sessionvault/config.toml, or SESSIONVAULT_CONFIG), read over the organization\'s /etc/sessionvault/config.toml (or SESSIONVAULT_SYSTEM_CONFIG).' -rfka ''
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" keyring' -l 'keyring' -d 'Where the device key lives: secret-service (default) or file (a 0600 file; weaker).' -rfka ''
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" idle-timeout' -l 'idle-timeout' -d 'Lock after this many seconds without requests (0 = never; default 900).' -rfka ''
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" log-level' -l 'log-level' -d 'Log level: trace, debug, info, notice, warning, error.' -rfka ''
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" demo' -l 'demo' -d 'Demo mode: built-in “Demo BankID” and “Demo Vipps” providers on 127.0.0.1 with synthetic people. Nothing real.'
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" version' -l 'version' -d 'Show the version.'
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_positional "vaultd" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'vaultd' -n '__vaultd_should_offer_completions_for_flags_or_options "vaultd help" version' -l 'version' -d 'Show the version.'
