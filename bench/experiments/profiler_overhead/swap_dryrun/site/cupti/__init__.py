# dry run only: no CUDA driver here; the bench detaches cupti-python's CUPTI before Proton's start
class cupti:
    @staticmethod
    def finalize():
        pass
