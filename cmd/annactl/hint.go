package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/anna-search/anna/hint"
)

// hintCommand renders an action an error suggests (package hint) as the
// annactl command that does it; "" for an action annactl has no command
// for (then its words serve).
func hintCommand(a hint.Action) string {
	or := func(s, alt string) string {
		if s == "" {
			return alt
		}
		return shellQuote(s)
	}
	switch a.Kind {
	case hint.InstallModel:
		return "annactl models install " + or(a.Model, "NAME")
	case hint.ListModels:
		return "annactl models list"
	case hint.ImportModel:
		flag := ""
		if a.Option != "" {
			flag = "--" + a.Option + " " + shellQuote(a.Value) + " "
		}
		return "annactl models import " + flag + "SRC DEST_DIR"
	case hint.AddModel:
		return "annactl models add " + or(a.Model, "MODEL_DIR")
	case hint.Reindex:
		if a.Option == "chunking" {
			return "annactl reindex --index " + or(a.Index, "DIR") + " --chunk-tokens N"
		}
		return "annactl reindex --index " + or(a.Index, "DIR") + " --model " + or(a.Model, "MODEL")
	case hint.Repair:
		return "annactl check --index " + or(a.Index, "DIR") + " --repair"
	case hint.AddDocuments:
		return "annactl index --index " + or(a.Index, "DIR") + " FILE"
	case hint.BuildReranker:
		return "annactl rerankers build"
	case hint.MineNegatives:
		return "annactl mine-negatives"
	case hint.SetOption:
		if f, ok := optionFlags[a.Option]; ok {
			if a.Value == "unset" || (f.unset && a.Value == f.unsetValue) {
				return "annactl " + f.command + " without " + f.flag
			}
			if f.boolean {
				return "annactl " + f.command + " " + f.flag
			}
			return "annactl " + f.command + " " + f.flag + " " + or(a.Value, f.arg)
		}
	}
	return ""
}

// optionFlags maps the library options that errors name (hint.SetOption)
// to annactl's flags.
var optionFlags = map[string]struct {
	command, flag, arg string
	unset              bool   // the flag's absence is unsetValue
	unsetValue         string // the option's value without the flag
	boolean            bool   // the flag takes no value (its presence sets the option true)
}{
	"server.Options.Reranker":        {command: "serve", flag: "--reranker", arg: "NAME|DIR"},
	"server.Options.ReadOnly":        {command: "serve", flag: "--read-only", unset: true, unsetValue: "false", boolean: true},
	"server.Options.StrictModel":     {command: "serve", flag: "--strict-model", unset: true, unsetValue: "false", boolean: true},
	"server.Options.AllowedHosts":    {command: "serve", flag: "--allow-host", arg: "NAME"},
	"server.Options.CORS":            {command: "serve", flag: "--cors", arg: "ORIGIN"},
	"server.Limits.MaxTextBytes":     {command: "serve", flag: "--max-text", arg: "BYTES"},
	"server.Limits.MaxRequestTokens": {command: "serve", flag: "--max-tokens", arg: "N"},
	"adapt.Config.Generate":          {command: "adapt", flag: "--generate", arg: "N", unset: true, unsetValue: "0"},
	"train.Config.ModelDir":          {command: "train", flag: "--model", arg: "FILE.gguf"},
	"adapt.Config.Base":              {command: "adapt", flag: "--base", arg: "DIR"},
	"adapt.Config.Serve":             {command: "adapt", flag: "--serve", arg: "student|ensemble"},
	"mining.Options.Resume":          {command: "mine-negatives", flag: "--resume", unset: true, unsetValue: "false", boolean: true},
}

// printHints writes the actions err carries as commands under its
// message: "run: " before the first, "or:  " before the alternatives,
// the action's words where annactl has no command for it.
func printHints(w io.Writer, err error) {
	for i, a := range hint.Of(err) {
		cmd := hintCommand(a)
		if cmd == "" {
			cmd = a.String()
		}
		lead := "run: "
		if i > 0 {
			lead = "or:  "
		}
		fmt.Fprintf(w, "  %s%s\n", lead, cmd)
	}
}

// shellQuote quotes s for a POSIX shell when it holds more than letters,
// digits and the path characters that need none.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
