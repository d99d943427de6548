/*
 * main.c -- the dlbridge command: dispatch to one command, the usage text
 * and the option parser every command shares. See docs/dlbridge.1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const cli_cmd *const commands[] = {
    &cli_info,  &cli_check,  &cli_bench,   &cli_inspect,
    &cli_dtype, &cli_device, &cli_version,
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void list_commands(FILE *f) {
  for (size_t i = 0; i < NCOMMANDS; i++) {
    char head[64];
    snprintf(head, sizeof head, "%s %s", commands[i]->name,
             commands[i]->args);
    fprintf(f, "  %-24s %s\n", head, commands[i]->summary);
  }
}

static int usage(FILE *f) {
  fprintf(f, "usage: %s <command> [options] [args]\n"
             "       %s --version | -V | --help | -h | help [command]\n"
             "commands:\n", CLI_NAME, CLI_NAME);
  list_commands(f);
  fprintf(f, "Every command takes --help; the ones that report take --json.\n"
             "Exit status: 0 success, 1 failure, 2 bad command line.\n");
  return f == stderr ? CLI_USAGE : CLI_OK;
}

static const cli_cmd *find(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i]->name, name) == 0) return commands[i];
  return NULL;
}

static int unknown_command(const char *name) {
  fprintf(stderr, "%s: unknown command '%s'; valid commands:", CLI_NAME,
          cli_shown(name));
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(stderr, " %s", commands[i]->name);
  fprintf(stderr, "\n");
  return CLI_USAGE;
}

void cli_usage(const cli_cmd *cmd, FILE *f) {
  fprintf(f, "usage: %s %s [options]%s%s\n  %s\noptions:\n", CLI_NAME,
          cmd->name, cmd->args[0] != '\0' ? " " : "", cmd->args,
          cmd->summary);
  for (int i = 0; i < cmd->nopts; i++) {
    char head[64];
    snprintf(head, sizeof head, "%s%s%s", cmd->opts[i].name,
             cmd->opts[i].value_name != NULL ? " " : "",
             cmd->opts[i].value_name != NULL ? cmd->opts[i].value_name : "");
    fprintf(f, "  %-18s %s\n", head, cmd->opts[i].help);
  }
  fprintf(f, "  %-18s %s\n", "--help", "show this help and exit");
}

static int bad_option(const cli_cmd *cmd, const char *arg) {
  fprintf(stderr, "%s %s: unknown option '%s'; valid options:", CLI_NAME,
          cmd->name, cli_shown(arg));
  for (int i = 0; i < cmd->nopts; i++)
    fprintf(stderr, " %s", cmd->opts[i].name);
  fprintf(stderr, " --help\n");
  return CLI_USAGE;
}

int cli_run(const cli_cmd *cmd, int argc, char **argv) {
  const char *values[16] = {NULL};
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (pos == NULL) {
    fprintf(stderr, "%s: out of memory\n", CLI_NAME);
    return CLI_FAILED;
  }
  int npos = 0, rc = -1, options_done = 0;
  for (int i = 0; i < argc && rc < 0; i++) {
    const char *a = argv[i];
    if (options_done || a[0] != '-' || strcmp(a, "-") == 0) {
      pos[npos++] = argv[i];
      continue;
    }
    if (strcmp(a, "--") == 0) {
      options_done = 1;
      continue;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      cli_usage(cmd, stdout);
      rc = CLI_OK;
      break;
    }
    size_t len = strcspn(a, "=");
    int k = 0;
    while (k < cmd->nopts && (strlen(cmd->opts[k].name) != len ||
                              strncmp(cmd->opts[k].name, a, len) != 0))
      k++;
    if (k == cmd->nopts) {
      rc = bad_option(cmd, a);
    } else if (cmd->opts[k].value_name == NULL) {
      if (a[len] == '=') {
        fprintf(stderr, "%s %s: %s takes no value; given '%s'\n", CLI_NAME,
                cmd->name, cmd->opts[k].name, cli_shown(a + len + 1));
        rc = CLI_USAGE;
      }
      values[k] = "";
    } else if (a[len] == '=') {
      values[k] = a + len + 1;
    } else if (i + 1 < argc) {
      values[k] = argv[++i];
    } else {
      fprintf(stderr, "%s %s: %s needs a value (%s)\n", CLI_NAME, cmd->name,
              cmd->opts[k].name, cmd->opts[k].value_name);
      rc = CLI_USAGE;
    }
  }
  if (rc < 0 && (npos < cmd->min_args ||
                 (cmd->max_args >= 0 && npos > cmd->max_args))) {
    if (npos < cmd->min_args)
      fprintf(stderr, "%s %s: missing arguments: %s\n", CLI_NAME, cmd->name,
              cmd->args);
    else
      fprintf(stderr, "%s %s: too many arguments: '%s' (it takes %d)\n",
              CLI_NAME, cmd->name, cli_shown(pos[cmd->max_args]),
              cmd->max_args);
    cli_usage(cmd, stderr);
    rc = CLI_USAGE;
  }
  if (rc < 0) rc = cmd->run(values, npos, pos);
  free((void *)pos);
  return rc;
}

/* rc, unless standard output could not be written (a full disk, a closed
 * descriptor): then the output is not what the command reported, and a
 * success becomes a failure. */
static int finish(int rc) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
  fprintf(stderr, "%s: cannot write to standard output%s%s\n", CLI_NAME,
          errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
  return rc == CLI_OK ? CLI_FAILED : rc;
}

/* what was followed by extra, one argument more than it takes. */
static int too_many(const char *what, const char *extra) {
  fprintf(stderr, "%s %s: too many arguments: '%s'\n", CLI_NAME, what,
          cli_shown(extra));
  return usage(stderr);
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
    return usage(stdout);
  if (strcmp(name, "help") == 0) {
    if (argc < 3) return usage(stdout);
    if (argc > 3) return too_many(name, argv[3]);
    const cli_cmd *cmd = find(argv[2]);
    if (cmd == NULL) return unknown_command(argv[2]);
    cli_usage(cmd, stdout);
    return CLI_OK;
  }
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
    if (argc > 2) return too_many(name, argv[2]);
    printf("%s\n", dlb_version_string());
    return CLI_OK;
  }
  if (name[0] == '-') {
    fprintf(stderr, "%s: unknown option '%s'; valid before a command: "
                    "--help -h --version -V\n", CLI_NAME, cli_shown(name));
    return CLI_USAGE;
  }
  const cli_cmd *cmd = find(name);
  if (cmd == NULL) return unknown_command(name);
  return cli_run(cmd, argc - 2, argv + 2);
}

int main(int argc, char **argv) { return finish(dispatch(argc, argv)); }
