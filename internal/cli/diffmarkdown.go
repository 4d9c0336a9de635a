package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/aidonow/eva/internal/placement"
	"github.com/aidonow/eva/internal/prview"
	"github.com/aidonow/eva/internal/treediff"
)

// diffOutputs are diff's -o values: the reporting formats, and the pull-request
// preview.
var diffOutputs = append(slices.Clone(outputFormats), "markdown")

// checkDiffOutput refuses an -o value diff does not write.
func checkDiffOutput(output string) error {
	if !slices.Contains(diffOutputs, output) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--output %q: want text, json, yaml or markdown", output)}
	}
	return nil
}

// writeRefusedPreview writes the preview of a change whose files were refused (err,
// from prepare), when it is one and markdown is asked for; err is returned either way.
func writeRefusedPreview(out io.Writer, output, env string, err error) error {
	var refused *filesRefused
	if output == "markdown" && errors.As(err, &refused) {
		fmt.Fprint(out, prview.Markdown(prview.Preview{Environment: env, Problems: refused.problems}))
	}
	return err
}

// previewOf is the pull-request preview of report, the change j renders, and of
// publish's refusal of it.
func previewOf(j *job, report *treediff.Report, refused error) prview.Preview {
	p := prview.Preview{Environment: j.r.Env.Name, Report: report, Tenants: map[string]prview.Tenant{},
		PublishRefusal: errorText(refused)}
	for _, t := range j.tenants {
		code := t.Spec.CapsuleCode
		cell := j.placed[code]
		if m := j.moves[code]; m != nil {
			cell = m.from + " → " + m.next.To
		}
		p.Tenants[code] = prview.Tenant{Wave: int(t.Spec.WaveOrDefault()), Cell: cell}
	}
	if len(j.r.Env.Settings.Cells) == 0 {
		return p
	}
	for _, c := range newCellReport(j.r.Env, placement.Result{Cells: j.placed, Use: j.use}, nil).Cells {
		p.Cells = append(p.Cells, prview.Cell{Name: c.Name, Tenants: c.Tenants, CPU: c.Headroom.CPU,
			Memory: c.Headroom.Memory, Pods: c.Headroom.Pods, TenantsLeft: c.Headroom.Tenants})
	}
	return p
}
