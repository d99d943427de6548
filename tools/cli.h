/*
 * cli.h -- what the dlbridge command's files share: the commands, option
 * parsing and a small JSON writer.
 *
 * Exit codes, for every command: 0 success; 1 the work failed (a check
 * failed, a name or file was refused, a benchmark failed, standard output
 * could not be written); 2 the command line was wrong (unknown command or
 * option, missing or extra argument).
 */
#ifndef DLB_TOOLS_CLI_H
#define DLB_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "dlbridge.h"

#define CLI_OK 0
#define CLI_FAILED 1
#define CLI_USAGE 2

/* One option a command takes: "--name", with a value when value_name is
 * not NULL. */
typedef struct cli_opt {
  const char *name;
  const char *value_name;
  const char *help;
} cli_opt;

/* A command: its name, its positional arguments for the usage line, what
 * it does, its options (every command also takes --help) and its body.
 * run gets the option values (NULL when absent, "" for a flag given) in
 * the order of opts, and the positional arguments. */
typedef struct cli_cmd {
  const char *name;
  const char *args;
  const char *summary;
  const cli_opt *opts;
  int nopts;
  int min_args;
  int max_args; /* -1: any number */
  int (*run)(const char **values, int argc, char **argv);
} cli_cmd;

extern const cli_cmd cli_info, cli_check, cli_bench, cli_inspect, cli_dtype,
    cli_device, cli_version;

/* The program name for messages. */
#define CLI_NAME "dlbridge"

/* Parses argv (after the command name) for cmd and runs it. */
int cli_run(const cli_cmd *cmd, int argc, char **argv);

/* Prints cmd's usage and options to f. */
void cli_usage(const cli_cmd *cmd, FILE *f);

/* A kind of memory usable here: a device to allocate on, or ordinary cpu
 * memory registered with a runtime (registered is then that runtime's host
 * type, and device is cpu). */
typedef struct cli_kind {
  char label[48];
  DLDevice device;
  DLDeviceType registered;
} cli_kind;

/* The kinds usable here, cpu first, every GPU of every runtime: sets *out
 * (new; release with free()) and returns their count, or -1 when out of
 * memory. */
int cli_kinds(cli_kind **out);

/* A JSON writer on stdout that places the commas itself. */
typedef struct json {
  int depth;
  int count[32];  /* values written at each depth */
  int after_key;
} json;

void json_open(json *j, char bracket);  /* '{' or '[' */
void json_close(json *j, char bracket); /* '}' or ']' */
void json_key(json *j, const char *key);
void json_string(json *j, const char *s); /* NULL writes null */
void json_int(json *j, long long v);
void json_uint(json *j, uint64_t v);
void json_bool(json *j, int v);
/* 1 true, 0 false, anything else null: a capability that may be unknown. */
void json_tristate(json *j, int v);

/* The length of the well-formed UTF-8 sequence at p (a byte >= 0x80), or
 * 0 when it is not one (stray continuation, overlong form, surrogate,
 * past U+10FFFF, cut short). */
int cli_utf8_length(const unsigned char *p);

/* s as text outputs print it: control bytes (C0, DEL and the C1 controls),
 * bytes that are not UTF-8 and backslashes escaped (\n, \t, \r, \\,
 * \xHH), other UTF-8 as it is; a result past 16 KiB ends in "...". The
 * answer lives in one of four buffers reused in turn, so one printf may
 * show up to four. */
const char *cli_shown(const char *s);

/* "yes", "no" or "unknown" for a capability. */
const char *cli_tristate(int v);

#endif /* DLB_TOOLS_CLI_H */
