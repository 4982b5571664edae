/* The one entry point shardgate calls in libjpeg: decode a JPEG held in memory, as PIL's
 * `Image.open(...)` decodes it (JDCT_ISLOW, fancy upsampling, block smoothing: libjpeg's
 * defaults, which PIL keeps), into a buffer the caller hands over once the header is read.
 *
 * libjpeg reports a fatal error by calling `error_exit`, which must not return. Rust's release
 * profile aborts on panic, so nothing may unwind through this code: `error_exit` longjmps back
 * to `sg_jpeg_decode`, which frees everything libjpeg holds and returns the message. No Rust
 * frame lies between the setjmp and the longjmp (the caller's `allocate` returns before any
 * libjpeg call that can fail). */

#include <limits.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "jpeglib.h"
#include "jerror.h"

/* Sees the header's size and colour components; returns a buffer of width * height *
 * components bytes, or NULL to refuse the image (its limits). */
typedef unsigned char *(*sg_jpeg_allocate)(void *context, unsigned width, unsigned height, int components);

struct sg_jpeg_job {
  const unsigned char *data;
  unsigned long size;
  /* Bound on libjpeg's own allocations per output pixel (the progressive coefficient buffer)
   * beyond `scratch_bytes`. */
  unsigned long bytes_per_pixel;
  unsigned long scratch_bytes;
  /* Progressive scans beyond this are refused (each one costs a pass over the image). */
  int scans_max;
  sg_jpeg_allocate allocate;
  void *context;
  /* Out: the colour components the file stores. */
  int components;
  /* Out: the message of a refusal. */
  char message[JMSG_LENGTH_MAX];
};

enum { SG_JPEG_OK = 0, SG_JPEG_MALFORMED = 1, SG_JPEG_REFUSED = 2 };

struct sg_error {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
};

struct sg_progress {
  struct jpeg_progress_mgr pub;
  int scans_max;
  volatile int too_many_scans;
};

static void sg_error_exit(j_common_ptr cinfo) {
  struct sg_error *error = (struct sg_error *)cinfo->err;
  longjmp(error->jump, 1);
}

/* PIL silences libjpeg's warnings (corrupt data it decodes through), except that its
 * suspending source makes running out of bytes fatal ("image file is truncated"), even where
 * only the EOI marker is missing: the memory source warns where PIL's would suspend. */
static void sg_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0) {
    cinfo->err->num_warnings++;
    if (cinfo->err->msg_code == JWRN_JPEG_EOF)
      cinfo->err->error_exit(cinfo);
  }
}

/* libjpeg calls this at least once per scan while it reads a progressive file whole. */
static void sg_progress_monitor(j_common_ptr cinfo) {
  struct sg_progress *progress = (struct sg_progress *)cinfo->progress;
  if (((j_decompress_ptr)cinfo)->input_scan_number > progress->scans_max) {
    progress->too_many_scans = 1;
    cinfo->err->error_exit(cinfo);
  }
}

static void sg_read_rows(j_decompress_ptr cinfo, unsigned char *pixels) {
  size_t stride = (size_t)cinfo->output_width * (size_t)cinfo->output_components;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW rows[4];
    JDIMENSION count = 0;
    for (; count < 4 && cinfo->output_scanline + count < cinfo->output_height; count++)
      rows[count] = pixels + (size_t)(cinfo->output_scanline + count) * stride;
    /* No rows means a suspended source, which the memory source never is: fail rather than
     * loop. */
    if (jpeg_read_scanlines(cinfo, rows, count) == 0)
      ERREXIT(cinfo, JERR_INPUT_EMPTY);
  }
}

/* Everything that can fail, in its own frame: a longjmp out of it leaves no local of the
 * frame that called setjmp modified. */
static int sg_decode(j_decompress_ptr cinfo, struct sg_jpeg_job *job) {
  unsigned char *pixels;
  unsigned long pixel_count, memory_max;

  jpeg_mem_src(cinfo, job->data, job->size);
  jpeg_read_header(cinfo, TRUE);
  /* PIL opens one component as L, three as RGB, four as CMYK ("CMYK;I": libjpeg's output,
   * which it inverts). Grey goes out as RGB here: libjpeg copies the level to all three. */
  cinfo->out_color_space = cinfo->num_components == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_calc_output_dimensions(cinfo);
  job->components = cinfo->num_components;
  pixels = job->allocate(job->context, cinfo->output_width, cinfo->output_height, cinfo->output_components);
  if (pixels == NULL)
    return SG_JPEG_REFUSED;
  /* The caller's limits bound the pixel count, so this cannot overflow an unsigned long of
   * 64 bits; where long is 32 bits it saturates. */
  pixel_count = (unsigned long)cinfo->output_width * cinfo->output_height;
  memory_max = pixel_count * job->bytes_per_pixel + job->scratch_bytes;
  cinfo->mem->max_memory_to_use = memory_max > (unsigned long)LONG_MAX ? LONG_MAX : (long)memory_max;

  jpeg_start_decompress(cinfo);
  sg_read_rows(cinfo, pixels);
  return SG_JPEG_OK;
}

int sg_jpeg_decode(struct sg_jpeg_job *job) {
  struct jpeg_decompress_struct cinfo;
  struct sg_error error;
  struct sg_progress progress;
  volatile int status = SG_JPEG_MALFORMED;

  memset(&cinfo, 0, sizeof cinfo);
  memset(&error, 0, sizeof error);
  memset(&progress, 0, sizeof progress);
  cinfo.err = jpeg_std_error(&error.pub);
  error.pub.error_exit = sg_error_exit;
  error.pub.emit_message = sg_emit_message;
  progress.pub.progress_monitor = sg_progress_monitor;
  progress.scans_max = job->scans_max;
  job->message[0] = '\0';
  if (setjmp(error.jump) == 0) {
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &progress.pub;
    status = sg_decode(&cinfo, job);
  } else if (progress.too_many_scans) {
    snprintf(job->message, sizeof job->message, "more than %d progressive scans", job->scans_max);
  } else {
    error.pub.format_message((j_common_ptr)&cinfo, job->message);
  }
  jpeg_destroy_decompress(&cinfo);
  return status;
}
