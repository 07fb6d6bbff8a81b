package docs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSteps(t *testing.T) {
	fence := "```"
	tests := []struct {
		name string
		text string
		want []Step
	}{
		{
			name: "a step with its output, one without, nothing after Go Back",
			text: "# Page\n\n" + fence + "bash\nkubectl get a\n" + fence + "\n\nIt prints:\n\n" + fence + "text\nA\n" + fence + "\n\n" +
				fence + "yaml\nkind: X\n" + fence + "\n" + fence + "sh\nkubectl get b\n" + fence + "\n\n## Go Back\n\n" + fence + "bash\nkubectl delete a\n" + fence + "\n",
			want: []Step{
				{Block: Block{Info: "bash", Body: "kubectl get a\n", Line: 3}, Expected: "A\n"},
				{Block: Block{Info: "sh", Body: "kubectl get b\n", Line: 16}},
			},
		},
		{
			name: "an output before any shell block, and a second one, belong to no step",
			text: fence + "text\nX\n" + fence + "\n" + fence + "bash\necho Y\n" + fence + "\n" + fence + "text\nY\n" + fence + "\n" + fence + "text\nZ\n" + fence + "\n",
			want: []Step{{Block: Block{Info: "bash", Body: "echo Y\n", Line: 4}, Expected: "Y\n"}},
		},
		{
			name: "indented blocks of a list",
			text: "1. Run:\n\n   " + fence + "bash\n   kubectl get a \\\n     -o name\n   " + fence + "\n\n   " + fence + "text\n   a\n   " + fence + "\n",
			want: []Step{{Block: Block{Info: "bash", Body: "kubectl get a \\\n  -o name\n", Line: 3}, Expected: "a\n"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Page{Path: "p.md", Text: tt.text}.Steps())
		})
	}
}
