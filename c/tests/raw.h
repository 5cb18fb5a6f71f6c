/* The raw frame API tests (raw.c), run by the runner in tests.c. */
#ifndef FIELDHUB_TEST_RAW_H
#define FIELDHUB_TEST_RAW_H

void test_a_2048_byte_raw_frame_crosses_between_c_and_rust_clients(void);

#endif
