package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
)

func (a *app) checkCommand() *cobra.Command {
	var (
		dir, model     string
		repair, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "check --index DIR [--repair]",
		Short: "verify an anna directory (store, BM25 index, HNSW graph); --repair rebuilds what is derived",
		Long: `Verifies the directory without changing it, as bbolt's tx.Check does for its
pages: anna.db (both meta pages, bbolt's page check, every record's checksum, the
change log, counters, a vector for the model for every document), the BM25 index
(built from this store, in step with it, the same documents, sound statistics) and
the HNSW graph (loads, in step, the same documents and vectors, bounded and
non-dangling neighbour lists, every document reachable). Each problem is printed
with the documents involved; the exit status is 1 when there is any.

--repair then salvages a damaged anna.db (every whole record is kept; the damaged
file stays beside it as anna.db.damaged-TIME), rebuilds the BM25 index and the
graph from the store, embeds documents without a vector, lists documents the old
indexes held that the store lost, and checks again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			ctx := cmd.Context()
			if !repair {
				rep, err := engine.Check(ctx, dir)
				if err != nil {
					return err
				}
				if asJSON {
					return a.checkJSON(rep, nil)
				}
				a.printReport(rep)
				if !rep.OK() {
					return exitError{1}
				}
				return nil
			}
			rep, err := engine.Repair(ctx, dir, engine.RepairOptions{Model: model, Logf: a.logf})
			if err != nil {
				return err
			}
			if asJSON {
				return a.checkJSON(rep.After, rep)
			}
			if rep.Before.OK() {
				a.printReport(rep.Before)
				return nil
			}
			fmt.Fprintf(a.stdout, "before the repair:\n")
			a.printReport(rep.Before)
			for _, act := range rep.Actions {
				fmt.Fprintf(a.stdout, "repair: %s\n", act)
			}
			for _, l := range []struct {
				what string
				ids  []string
			}{{"lost (index them again)", rep.Lost}, {"restored at an older version", rep.Older}, {"restored without the change-log entry confirming them", rep.Unconfirmed}} {
				if len(l.ids) > 0 {
					fmt.Fprintf(a.stdout, "documents %s: %d: %q\n", l.what, len(l.ids), l.ids[:min(len(l.ids), 50)])
				}
			}
			fmt.Fprintf(a.stdout, "after the repair:\n")
			a.printReport(rep.After)
			if !rep.After.OK() {
				return exitError{1}
			}
			return nil
		},
	}
	indexFlag(cmd, &dir, "anna directory `DIR`")
	cmd.Flags().BoolVar(&repair, "repair", false, "salvage the store and rebuild the derived indexes, then check again")
	modelVar(cmd.Flags(), &model, "model", "", "with --repair: model directory `DIR` to embed with when the store records none")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func (a *app) printReport(rep *engine.Report) {
	if rep.OK() {
		fmt.Fprintf(a.stdout, "%s: ok (%d documents, change seq %d, model %s)\n", rep.Dir, rep.Documents, rep.Seq, rep.Model)
		return
	}
	if rep.Readable {
		fmt.Fprintf(a.stdout, "%s: %d problem(s) (%d documents in anna.db, change seq %d)\n", rep.Dir, len(rep.Problems), rep.Documents, rep.Seq)
	} else {
		fmt.Fprintf(a.stdout, "%s: %d problem(s) (anna.db cannot be read)\n", rep.Dir, len(rep.Problems))
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(a.stdout, "  %s\n", p)
	}
}

type jsonProblem struct {
	Part string   `json:"part"`
	What string   `json:"what"`
	IDs  []string `json:"ids,omitempty"`
	N    int      `json:"documents,omitempty"`
}

type jsonCheck struct {
	Dir         string        `json:"dir"`
	OK          bool          `json:"ok"`
	Documents   int           `json:"documents"`
	Seq         uint64        `json:"seq"`
	Model       string        `json:"model_fingerprint"`
	Problems    []jsonProblem `json:"problems"`
	Before      []jsonProblem `json:"problems_before_repair,omitempty"`
	Actions     []string      `json:"repair_actions,omitempty"`
	Lost        []string      `json:"lost,omitempty"`
	Older       []string      `json:"older,omitempty"`
	Unconfirmed []string      `json:"unconfirmed,omitempty"`
}

func problemsJSON(ps []engine.Problem) []jsonProblem {
	out := make([]jsonProblem, len(ps))
	for i, p := range ps {
		out[i] = jsonProblem{Part: p.Part, What: p.What, IDs: p.IDs, N: p.N}
	}
	return out
}

func (a *app) checkJSON(rep *engine.Report, repaired *engine.RepairReport) error {
	out := jsonCheck{Dir: rep.Dir, OK: rep.OK(), Documents: rep.Documents, Seq: rep.Seq, Model: rep.Model, Problems: problemsJSON(rep.Problems)}
	if repaired != nil {
		out.Before, out.Actions = problemsJSON(repaired.Before.Problems), repaired.Actions
		out.Lost, out.Older, out.Unconfirmed = repaired.Lost, repaired.Older, repaired.Unconfirmed
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	if !rep.OK() {
		return exitError{1}
	}
	return nil
}
