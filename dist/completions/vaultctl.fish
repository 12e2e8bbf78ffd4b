function __vaultctl_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __vaultctl_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __vaultctl_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __vaultctl_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __vaultctl_parse_tokens -S
    set -l unparsed_tokens (__vaultctl_tokens -pc)
    switch $unparsed_tokens[1]
    case 'vaultctl'
        __vaultctl_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'status'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'json' 'version' 'h/help'
        case 'login'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'no-browser' 'browser=' 'json' 'version' 'h/help'
        case 'token'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'json' 'min-valid=' 'version' 'h/help'
        case 'factors'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'json' 'version' 'h/help'
        case 'lock'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'version' 'h/help'
        case 'unlock'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'version' 'h/help'
        case 'enroll'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'version' 'h/help'
        case 'disable'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'y/yes' 'version' 'h/help'
        case 'reenroll'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'version' 'h/help'
        case 'reset'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'y/yes' 'version' 'h/help'
        case 'import'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'issuer=' 'client-id=' 'account=' 'provider=' 'name=' 'expires-at=' 'secrets-file=' 'version' 'h/help'
        case 'sessions'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'json' 'version' 'h/help'
        case 'logout'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'all' 'version' 'h/help'
        case 'context'
            __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'json' 'account=' 'version' 'h/help'
        case 'sync'
            __vaultctl_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'conflicts'
                __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'json' 'version' 'h/help'
            end
        case 'audit'
            __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'json' 'verify' 'limit=' 'version' 'h/help'
        case 'apps'
            __vaultctl_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'list'
                __vaultctl_parse_subcommand 0 'socket=' 'non-interactive' 'json' 'version' 'h/help'
            case 'revoke'
                __vaultctl_parse_subcommand 1 'socket=' 'non-interactive' 'version' 'h/help'
            end
        case 'help'
            __vaultctl_parse_subcommand -r 1 'version'
        end
    end
end

function __vaultctl_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __vaultctl_parse_subcommand -S -a positional_count
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

function __vaultctl_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __vaultctl_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__vaultctl_tokens -p)
    if test -z "$(__vaultctl_tokens -t)"
        set -l index (count (__vaultctl_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'vaultctl' -f
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'status' -d 'Show whether the vault is locked, the accounts, and the unlock methods.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'login' -d 'Log in with BankID, Vipps, ID-porten or another configured provider.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'token' -d 'Print an access token for scripts (unlocking first if needed).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'factors' -d 'List the unlock methods and their state.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'lock' -d 'Lock the vault now (the vault key is wiped from memory).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'unlock' -d 'Unlock the vault with your fingerprint, PIN, or another method.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'enroll' -d 'Set up an unlock method (fingerprint or pin).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'disable' -d 'Turn an unlock method off (its keyslot is destroyed).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'reenroll' -d 'Set an unlock method up again (a new PIN, fingerprints again).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'reset' -d 'Start over: delete every saved session and unlock method (asks first).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'import' -d 'Store an existing session (like oidc-agent\'s --rt).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'sessions' -d 'List stored sessions (by token hash; no secrets).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'logout' -d 'Log an account out, or every account with --all.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'context' -d 'Choose the active organization (for members of several); remembered across restarts.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'sync' -d 'Member-record sync: list conflicts a person must resolve.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'audit' -d 'Show the security event log, or check that nobody changed it.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'apps' -d 'List the apps allowed to use each login, or take one\'s permission back.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl status" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl status" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl status" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl status" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" no-browser' -l 'no-browser' -d 'Print the login address instead of opening a browser.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" browser' -l 'browser' -d 'A command to open the login address with (default: $BROWSER or xdg-open).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl login" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl token" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl token" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl token" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl token" min-valid' -l 'min-valid' -d 'Refresh first if the token expires within this many seconds (like oidc-token --time).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl token" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl token" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl factors" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl factors" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl factors" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl factors" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl factors" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl lock" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl lock" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl lock" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl lock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl unlock" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl unlock" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl unlock" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl unlock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl enroll" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl enroll" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl enroll" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl enroll" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl disable" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl disable" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl disable" y yes' -l 'yes' -s 'y' -d 'Do not ask for confirmation.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl disable" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl disable" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reenroll" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reenroll" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reenroll" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reenroll" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reset" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reset" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reset" y yes' -l 'yes' -s 'y' -d 'Do not ask for confirmation.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reset" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl reset" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" issuer' -l 'issuer' -d 'The provider\'s issuer URL.' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" client-id' -l 'client-id' -d 'The OAuth client id.' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" account' -l 'account' -d 'A name for the account (default: the issuer\'s host).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" provider' -l 'provider' -d 'Provider profile (bankid, vipps, idporten, generic).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" name' -l 'name' -d 'Display name of the person.' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" expires-at' -l 'expires-at' -d 'Access token expiry, Unix seconds.' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" secrets-file' -l 'secrets-file' -d 'Read the secrets from this file instead of stdin.' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl import" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sessions" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sessions" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sessions" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sessions" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sessions" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl logout" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl logout" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl logout" all' -l 'all' -d 'Log out everywhere.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl logout" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl logout" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl context" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl context" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl context" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl context" account' -l 'account' -d 'The account (needed when there are several).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl context" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl context" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl sync" -eq 1' -fa 'conflicts' -d 'National ID numbers that differ from the member record (shown masked; nothing was overwritten).'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync conflicts" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync conflicts" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync conflicts" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync conflicts" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl sync conflicts" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" verify' -l 'verify' -d 'Check the log\'s MAC chain instead of printing it.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" limit' -l 'limit' -d 'How many entries to show (newest last).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl audit" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl apps" -eq 1' -fa 'list' -d 'List the apps and the accounts they may use.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_positional "vaultctl apps" -eq 1' -fa 'revoke' -d 'Take back an app\'s permission to use its logins; it is asked again next time.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps list" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps list" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps list" json' -l 'json' -d 'Print the result as JSON.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps list" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps revoke" socket' -l 'socket' -d 'vaultd\'s socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).' -rfka ''
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps revoke" non-interactive' -l 'non-interactive' -d 'Never ask questions; fail with the reason instead.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps revoke" version' -l 'version' -d 'Show the version.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl apps revoke" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'vaultctl' -n '__vaultctl_should_offer_completions_for_flags_or_options "vaultctl help" version' -l 'version' -d 'Show the version.'
