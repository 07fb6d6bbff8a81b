package build

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBaseImageOf(t *testing.T) {
	tests := []struct {
		name       string
		dockerfile string
		want       string
		wantErr    bool
	}{
		{
			name:       "first declaration to end of line",
			dockerfile: "ARG base_image=europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.8.4\nFROM ${base_image}\nARG base_image=other\n",
			want:       "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.8.4",
		},
		{name: "trailing blanks and CR are kept (tag input)", dockerfile: "ARG base_image=img:1 \r\nFROM ${base_image}", want: "img:1 \r"},
		{name: "declaration on the last line without newline", dockerfile: "FROM x\nARG base_image=img:2", want: "img:2"},
		{name: "no declaration", dockerfile: "FROM scratch\n", wantErr: true},
		{name: "empty declaration", dockerfile: "ARG base_image=\nFROM x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BaseImageOf(tt.dockerfile)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
