// Package logging builds the manager's logger and lets its level change at
// run time through a small YAML file (`logLevel: debug`), e.g. a mounted
// ConfigMap, without a restart.
package logging

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"
)

// New returns a logger writing JSON (format "json") or human-readable
// console lines (format "console") at level, and the level handle.
func New(level, format string) (logr.Logger, zap.AtomicLevel, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return logr.Logger{}, zap.AtomicLevel{}, fmt.Errorf("log level %q: %w", level, err)
	}
	atomic := zap.NewAtomicLevelAt(lvl)
	var opts []crzap.Opts
	switch format {
	case "json":
		opts = append(opts, crzap.UseDevMode(false))
	case "console":
		opts = append(opts, crzap.UseDevMode(true), crzap.StacktraceLevel(zapcore.PanicLevel))
	default:
		return logr.Logger{}, zap.AtomicLevel{}, fmt.Errorf("log format %q: want json or console", format)
	}
	opts = append(opts, crzap.Level(atomic))
	return crzap.New(opts...), atomic, nil
}

// fileConfig is the run-time configuration file.
type fileConfig struct {
	LogLevel string `json:"logLevel"`
}

// ApplyFile sets the level from the file at path.
func ApplyFile(path string, level zap.AtomicLevel) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg fileConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	if strings.TrimSpace(cfg.LogLevel) == "" {
		return nil
	}
	lvl, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("%s: log level %q: %w", path, cfg.LogLevel, err)
	}
	level.SetLevel(lvl)
	return nil
}

// Watch applies the file now and after every change until ctx ends. It
// watches the directory, so that ConfigMap volume updates (a symlink swap)
// are seen too.
func Watch(ctx context.Context, path string, level zap.AtomicLevel, log logr.Logger) error {
	if err := ApplyFile(path, level); err != nil && !os.IsNotExist(err) {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		_ = w.Close()
		return err
	}
	go func() {
		defer func() { _ = w.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				before := level.Level()
				if err := ApplyFile(path, level); err != nil && !os.IsNotExist(err) {
					log.Error(err, "reading the log configuration")
				} else if level.Level() != before {
					log.Info("log level changed", "level", level.Level().String())
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Error(err, "watching the log configuration")
			}
		}
	}()
	return nil
}
