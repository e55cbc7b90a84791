// Package config is the table controller's config file
// (deploy/tablectl.json): its schema, defaults and limits (Load, Parse), and
// `tablectl config check`, which tells the whole truth about a file
// (Check: every finding in file order, with line and column, missing
// devices and files, "did you mean" for unknown keys). The controller, init
// (internal/provision) and the commands read the config through it.
package config
