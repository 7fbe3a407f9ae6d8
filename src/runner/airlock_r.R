# The R REPL's cell function (r.c evaluates this file once, in the R process it embeds, and
# keeps the function it returns). One call runs one cell: its top-level expressions in the
# global environment, as R's own REPL does, printing each visible value but the last, whose
# printed text is the result. Plots go to PNG files in plotdir (a device per plot, opened by
# options(device)), closed after the cell; r.c sends them as image/png outputs.
# Returns a character vector: status ("ok" or "error"), result (NA: none), error name, value
# and traceback (NA when ok), then the PNG files made, in order.
local({
  # Where the R process may execute no program (r.c's seccomp filter), base's Sys.which() would
  # run `which` and fail: utils calls it when it loads (.osVersion()). It is replaced by one
  # that finds nothing, which is the truth there, then the default packages R was told not to
  # load at start are attached, giving R's own search order.
  if (identical(Sys.getenv("AIRLOCK_R_NO_EXEC"), "1")) {
    which <- function(names) {
      res <- rep("", length(names))
      names(res) <- names
      res
    }
    base <- baseenv()
    unlockBinding("Sys.which", base)
    assign("Sys.which", which, envir = base)
    lockBinding("Sys.which", base)
    for (pkg in c("methods", "datasets", "utils", "grDevices", "graphics", "stats"))
      suppressPackageStartupMessages(library(pkg, character.only = TRUE))
    Sys.unsetenv(c("AIRLOCK_R_NO_EXEC", "R_DEFAULT_PACKAGES"))
  }

  tb_skip <- c("stop", "warning", ".handleSimpleError", "h", "doTryCatch", "tryCatchOne",
               "tryCatchList", "tryCatch", "withCallingHandlers", "withVisible", "eval",
               "run_expr")

  call_name <- function(call) {
    f <- call[[1L]]
    if (is.name(f)) as.character(f) else paste(deparse(f, nlines = 1L), collapse = "")
  }

  # R's own "Error in <call> : <message>" line, and "Calls:" with the user's frames.
  traceback_of <- function(e, calls) {
    msg <- conditionMessage(e)
    call <- user_call(conditionCall(e))
    head <- if (is.null(call)) paste0("Error: ", msg) else
      paste0("Error in ", paste(deparse(call, nlines = 1L), collapse = ""), " : ", msg)
    names <- vapply(calls, call_name, "")
    names <- names[!(names %in% tb_skip) & nzchar(names)]
    if (length(names) > 1L) paste0(head, "\nCalls: ", paste(names, collapse = " -> ")) else head
  }

  # The call a condition names, or NULL where that is the driver's own (a top-level error).
  user_call <- function(call) {
    if (is.null(call) || identical(call, quote(eval(expr, globalenv()))) ||
        identical(call[[1L]], quote(parse))) NULL else call
  }

  text_of <- function(value) {
    paste(utils::capture.output(print(value)), collapse = "\n")
  }

  function(code, cell, plotdir) {
    devs <- integer(0)
    plot_no <- 0L
    old <- options(device = function(...) {
      plot_no <<- plot_no + 1L
      grDevices::png(file.path(plotdir, sprintf("c%06d-%03d-%%03d.png", cell, plot_no)),
                     width = 640L, height = 480L, res = 96, type = "cairo")
      devs <<- c(devs, grDevices::dev.cur())
    })
    on.exit(options(old), add = TRUE)
    calls <- NULL
    base <- sys.nframe()
    out <- tryCatch({
      exprs <- parse(text = code, keep.source = FALSE)
      result <- NA_character_
      n <- length(exprs)
      for (i in seq_len(n)) {
        run_expr <- function(expr) withVisible(eval(expr, globalenv()))
        v <- withCallingHandlers(run_expr(exprs[[i]]),
          error = function(e) calls <<- utils::tail(sys.calls(), -base),
          warning = function(w) {
            call <- user_call(conditionCall(w))
            where <- if (is.null(call)) "" else
              paste0("In ", paste(deparse(call, nlines = 1L), collapse = ""), " : ")
            cat("Warning message:\n", where, conditionMessage(w), "\n", sep = "",
                file = stderr())
            invokeRestart("muffleWarning")
          })
        if (v$visible) {
          if (i < n) print(v$value) else result <- text_of(v$value)
        }
      }
      c("ok", result, NA_character_, NA_character_, NA_character_)
    }, error = function(e) {
      c("error", NA_character_, "RError", conditionMessage(e),
        traceback_of(e, if (is.null(calls)) list() else calls))
    }, interrupt = function(i) {
      c("error", NA_character_, "KeyboardInterrupt", "the cell was interrupted", "")
    })
    for (d in devs) if (d %in% grDevices::dev.list()) grDevices::dev.off(d)
    files <- sort(list.files(plotdir, pattern = sprintf("^c%06d-.*[.]png$", cell),
                             full.names = TRUE))
    c(enc2utf8(out), files)
  }
})
