package main

import (
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every command's -h, -help, --help and claimctl help COMMAND print its
// usage line, what it does and exactly the flags it takes, and exit 0;
// claimctl -h and claimctl help list every command.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "-help"}, {c.name, "--help"}, {"help", c.name}, {c.name, "-config", "none.json", "-h"}} {
			code, out, _ := ctl(t, "", args...)
			require.Equal(t, exitOK, code, args)
			require.True(t, strings.HasPrefix(out, "usage: claimctl "+c.name+" [flags]\n\n"+c.about+"\n"), "%v: %s", args, out)
			taken := map[string]bool{}
			for _, g := range c.flagGroups() {
				if len(g.names) > 0 {
					require.Contains(t, out, "\n"+g.title+":\n")
				}
				for _, name := range g.names {
					taken[name] = true
					require.Regexp(t, `\n  -`+name+`[ \n]`, out, "%s lists -%s", c.name, name)
				}
			}
			all := flag.NewFlagSet("all", flag.ContinueOnError)
			defineFlags(all, &options{})
			all.VisitAll(func(f *flag.Flag) {
				if !taken[f.Name] {
					require.NotRegexp(t, `\n  -`+f.Name+`[ \n]`, out, "%s does not list -%s, which it does not take", c.name, f.Name)
				}
			})
		}
	}
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"help"}} {
		code, out, _ := ctl(t, "", args...)
		require.Equal(t, exitOK, code)
		require.True(t, strings.HasPrefix(out, "usage: claimctl COMMAND "), out)
		for _, c := range commands {
			require.Contains(t, out, "\n  "+c.name+" ")
		}
		require.Contains(t, out, "claimctl COMMAND -h")
	}
}

// Every flag belongs to a group or to a command, and a command's help
// names every flag it takes.
func TestEveryFlagIsTaken(t *testing.T) {
	t.Parallel()
	taken := map[string]bool{}
	for _, c := range commands {
		fs := c.flagSet(&options{})
		for _, g := range c.flagGroups() {
			for _, name := range g.names {
				require.NotNil(t, fs.Lookup(name), "%s: -%s", c.name, name)
				taken[name] = true
			}
		}
	}
	all := flag.NewFlagSet("all", flag.ContinueOnError)
	defineFlags(all, &options{})
	all.VisitAll(func(f *flag.Flag) { require.True(t, taken[f.Name], "no command takes -%s", f.Name) })
}

// A command line claimctl cannot parse prints one error line, then the
// usage (the command's for a bad flag, the command list otherwise), and
// exits 2, before anything is opened.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		msg, want string
	}{
		{nil, "claimctl: no command given\n", "usage: claimctl COMMAND "},
		{[]string{"frobnicate"}, "claimctl: unknown command \"frobnicate\"\n", "usage: claimctl COMMAND "},
		{[]string{"help", "frobnicate"}, "claimctl: help: want one command, got \"frobnicate\"\n", "usage: claimctl COMMAND "},
		{[]string{"stats", "-nope"}, "claimctl: stats: flag provided but not defined: -nope\n", "usage: claimctl stats [flags]\n"},
		{[]string{"stats", "-yes"}, "claimctl: stats: flag provided but not defined: -yes\n", "usage: claimctl stats [flags]\n"},
		{[]string{"stuck", "-older", "soon"}, "claimctl: stuck: invalid value \"soon\" for flag -older: parse error\n", "usage: claimctl stuck [flags]\n"},
		{[]string{"leases", "-key"}, "claimctl: leases: flag needs an argument: -key\n", "usage: claimctl leases [flags]\n"},
		{[]string{"reap", "stale"}, "claimctl: reap: unexpected argument \"stale\" (flags come after the command)\n", "usage: claimctl reap [flags]\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, stderr := ctl(t, "", tc.args...)
			require.Equal(t, exitUsage, code)
			require.Empty(t, out)
			require.True(t, strings.HasPrefix(stderr, tc.msg+"\n"+tc.want), stderr)
		})
	}
}
